import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { marketplacePageSchema, storableRecords } from "@/lib/marketplace/schemas";
import { marketplaceItems } from "./marketplace";
import { startSimulators, type RunningSimulators } from "./server";

let sim: RunningSimulators;
beforeAll(async () => {
  // Production windows (statistics: one request a minute), no latency: a second request is
  // always refused, however slow the machine.
  sim = await startSimulators({
    marketplace: { timeScale: 1, latencyMs: () => 0, pages: (tenant) => (tenant.startsWith("three") ? 3 : 10) },
  });
});
afterAll(() => sim.close());
beforeEach(() => sim.marketplace.reset());

const tenant = (label: string) => `${label}-${randomUUID().slice(0, 8)}`;
const get = (path: string, init?: RequestInit) => fetch(`${sim.url}${path}`, init);

describe("the marketplace simulator", () => {
  it("pages through a tenant's data: page, nextPage, the same items every time", async () => {
    const t = tenant("three");
    const pages = [];
    for (const page of [1, 2, 3]) {
      const response = await get(`/marketplace/orders?tenant=${t}&page=${page}`);
      expect(response.status).toBe(200);
      pages.push(marketplacePageSchema.parse(await response.json()));
    }
    expect(pages.map((p) => [p.page, p.nextPage])).toEqual([
      [1, 2],
      [2, 3],
      [3, null],
    ]);
    expect(pages[1]!.items).toEqual(marketplaceItems("orders", t, 2, 20));
    expect(new Set(pages.flatMap((p) => storableRecords(p.items).items.map((i) => i.id))).size).toBe(60);
    const past = await get(`/marketplace/orders?tenant=${t}&page=4`);
    expect(past.status).toBe(404);
    expect((await past.json()).error.message).toContain("has 3 pages");
  });

  it("answers 429 with Retry-After beyond the tenant's limit, and counts the violation per family and tenant", async () => {
    const t = tenant("busy");
    expect((await get(`/marketplace/statistics?tenant=${t}`)).status).toBe(200);
    const refused = await get(`/marketplace/statistics?tenant=${t}&page=2`);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBe(60);
    expect(Number(refused.headers.get("retry-after-ms"))).toBeGreaterThan(59_000);
    expect((await refused.json()).error).toMatchObject({ type: "rate_limited" });
    // Another tenant, another family: their own buckets.
    expect((await get(`/marketplace/statistics?tenant=${tenant("other")}`)).status).toBe(200);
    expect((await get(`/marketplace/orders?tenant=${t}`)).status).toBe(200);

    expect(sim.marketplace.violations()).toEqual({
      total: 1,
      byFamily: { statistics: 1, orders: 0, ads: 0 },
      byScope: { [`statistics:${t}`]: 1 },
    });
    const overHttp = await (await get("/marketplace/_stats")).json();
    expect(overHttp).toEqual({ accepted: 3, violations: sim.marketplace.violations() });
  });

  it("allows a burst of the bucket's capacity, then refuses", async () => {
    const t = tenant("burst");
    const statuses = await Promise.all(
      Array.from({ length: 7 }, (_, i) => get(`/marketplace/ads?tenant=${t}&page=${i + 1}`).then((r) => r.status)),
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2);
    expect(sim.marketplace.violations().byFamily.ads).toBe(2);
  });

  it("resets its counters and buckets, in-process and over HTTP", async () => {
    const t = tenant("reset");
    await get(`/marketplace/statistics?tenant=${t}`);
    await get(`/marketplace/statistics?tenant=${t}`);
    expect(sim.marketplace.violations().total).toBe(1);
    const reset = await get("/marketplace/_stats", { method: "DELETE" });
    expect(await reset.json()).toEqual({
      accepted: 0,
      violations: { total: 0, byFamily: { statistics: 0, orders: 0, ads: 0 }, byScope: {} },
    });
    expect((await get(`/marketplace/statistics?tenant=${t}`)).status).toBe(200);
  });

  it("refuses what is not a page request, without spending a token", async () => {
    const missing = await get("/marketplace/orders");
    expect(missing.status).toBe(400);
    expect((await missing.json()).error.message).toContain("tenant");
    const family = await get("/marketplace/refunds?tenant=acme");
    expect(family.status).toBe(404);
    expect((await family.json()).error.message).toContain("statistics, orders, ads");
    expect((await get("/marketplace/orders?tenant=acme&page=0")).status).toBe(400);
    expect((await get("/marketplace/orders?tenant=acme&page=x")).status).toBe(400);
    expect(sim.marketplace.stats().accepted).toBe(0);
  });

  it("fails the next n requests on demand", async () => {
    sim.marketplace.failNext(1);
    const t = tenant("fail");
    expect((await get(`/marketplace/orders?tenant=${t}`)).status).toBe(500);
    expect((await get(`/marketplace/orders?tenant=${t}`)).status).toBe(200);
  });
});
