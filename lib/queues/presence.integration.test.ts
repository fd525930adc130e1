import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeRedis, key, redis } from "@/lib/redis/client";
import { commandsSent } from "@/test/helpers/monitor";
import { waitFor } from "@/test/helpers/wait";
import { announcePresence, livePresences, presenceKeys, withdrawPresence } from "./presence";

const ids: string[] = [];
const worker = (pid: number) => ({ host: "presence-test", pid, queues: ["imports"], concurrency: 2 });
const mine = async () => (await livePresences()).filter((p) => p.host === "presence-test");

afterEach(async () => {
  for (const id of ids.splice(0)) await withdrawPresence(redis(), id);
});
afterAll(async () => {
  await closeRedis();
});

describe("worker presence", () => {
  it("lists what each live process announced, renewed or not, and drops one at its clean stop", async () => {
    ids.push("presence-test:1", "presence-test:2");
    await announcePresence(redis(), "presence-test:1", worker(1));
    await announcePresence(redis(), "presence-test:2", worker(2));
    await announcePresence(redis(), "presence-test:1", { ...worker(1), concurrency: 8 });
    expect((await mine()).sort((a, b) => a.pid - b.pid)).toEqual([{ ...worker(1), concurrency: 8 }, worker(2)]);
    await withdrawPresence(redis(), "presence-test:1");
    expect(await mine()).toEqual([worker(2)]);
  });

  it("forgets a process that stopped renewing (a crash), by Redis's clock, and leaves nothing of it behind", async () => {
    ids.push("presence-test:crashed");
    await announcePresence(redis(), "presence-test:crashed", worker(3), 300);
    expect(await mine()).toEqual([worker(3)]);
    await waitFor(async () => (await mine()).length === 0, { what: "the lapsed presence to go", timeoutMs: 5_000 });
    const [lapses, entries] = presenceKeys();
    expect(await redis().zscore(lapses, "presence-test:crashed")).toBeNull();
    expect(await redis().hexists(entries, "presence-test:crashed")).toBe(0);
  });

  it("is read in one command on its two keys, never a SCAN of the keyspace", async () => {
    ids.push("presence-test:4");
    await announcePresence(redis(), "presence-test:4", worker(4));
    // A key that matches the old pattern (`workers:*`) is not a presence: nothing looks for it.
    const stray = key("workers", "presence-test:stray");
    await redis().set(stray, JSON.stringify(worker(9)), "PX", 60_000);
    try {
      const { result, sent } = await commandsSent(redis(), livePresences);
      expect(result.filter((p) => p.host === "presence-test")).toEqual([worker(4)]);
      // EVALSHA, or EVAL once after a Redis that did not know the script yet.
      expect(sent.filter((c) => c !== "eval")).toEqual(["evalsha"]);
    } finally {
      await redis().del(stray);
    }
  });

  it("skips an entry another version wrote in a shape this one does not read", async () => {
    ids.push("presence-test:odd");
    await announcePresence(redis(), "presence-test:odd", { ...worker(5), concurrency: -1 });
    expect(await mine()).toEqual([]);
  });
});
