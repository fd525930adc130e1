import { afterAll, describe, expect, it } from "vitest";
import { closeDb } from "@/lib/db/client";
import { closeRedis } from "@/lib/redis/client";
import { GET } from "./route";

afterAll(async () => {
  await closeRedis();
  await closeDb();
});

const get = (query = "") => GET(new Request(`http://localhost/api/metrics${query}`), {});

describe("GET /api/metrics", () => {
  it("serves Prometheus text in which every series names its process", async () => {
    const response = await get();
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const series = (await response.text()).split("\n").filter((l) => l && !l.startsWith("#"));
    expect(series.length).toBeGreaterThan(0);
    expect(series.filter((l) => !/[{,]process="/.test(l))).toEqual([]);
  });

  it("?sources=web leaves the workers out; a bad value is a 422, not a 500", async () => {
    const web = await (await get("?sources=web")).text();
    expect(web).toMatch(/process="web"/);
    expect(web).not.toMatch(/process="workers-/);
    const bad = await get("?sources=everyone");
    expect(bad.status).toBe(422);
    expect(await bad.json()).toMatchObject({ error: { code: "invalid_request" } });
  });
});
