import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { waitFor } from "@/test/helpers/wait";
import { closeRedis, key, redis } from "./client";
import { lapsingRegistry } from "./registry";

afterAll(async () => {
  await closeRedis();
});

/** A registry of its own for each test: nothing else writes to it. */
const fresh = () => lapsingRegistry(key("registry-test", randomUUID()));

describe("a registry of entries that lapse (real Redis)", () => {
  it("lists the live entries in id order with their latest value; a removed one is gone at once", async () => {
    const r = fresh();
    await r.renew(redis(), "b", "first", 60_000);
    await r.renew(redis(), "a", "only", 60_000);
    await r.renew(redis(), "b", "second", 60_000);
    expect(await r.list(redis())).toEqual([
      { id: "a", value: "only" },
      { id: "b", value: "second" },
    ]);
    await r.remove(redis(), "a");
    expect(await r.list(redis())).toEqual([{ id: "b", value: "second" }]);
    await r.remove(redis(), "b");
    expect(await redis().exists(...r.keys)).toBe(0);
  });

  it("drops an entry not renewed within its lifetime, and keeps one that was", async () => {
    const r = fresh();
    await r.renew(redis(), "crashed", "x", 300);
    await r.renew(redis(), "alive", "y", 60_000);
    await waitFor(async () => (await r.list(redis())).length === 1, { what: "the entry to lapse", timeoutMs: 5_000 });
    expect(await r.list(redis())).toEqual([{ id: "alive", value: "y" }]);
    expect(await redis().hexists(r.keys[1], "crashed")).toBe(0);
  });

  it("keeps nothing once its longest-lived entry has lapsed, even if nobody reads it again", async () => {
    const r = fresh();
    await r.renew(redis(), "short", "x", 200);
    await r.renew(redis(), "longer", "y", 400);
    expect(await redis().pttl(r.keys[0])).toBeGreaterThan(200);
    await waitFor(async () => (await redis().exists(...r.keys)) === 0, {
      what: "the keys to expire",
      timeoutMs: 5_000,
    });
  });
});
