import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { BUCKETS, FAMILIES, scopeOf, type Family } from "@/lib/ratelimit/buckets";
import { runWithRateLimitDeferral } from "@/lib/ratelimit/context";
import { breakerKey } from "@/lib/ratelimit/breaker";
import { OutsideServiceDown, RateLimitCapExceeded, RateLimitDefer } from "@/lib/ratelimit/errors";
import { bucketKey, createLimiter } from "@/lib/ratelimit/limiter";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { startSimulators, type RunningSimulators } from "@/workers/simulators/server";
import { MarketplaceError, fetchMarketplacePage, marketplaceClientStats } from "./client";

const connection = createRedis("producer", { enableOfflineQueue: true });
const tenants: string[] = [];
function fresh(label: string): string {
  const slug = `${label}-${randomUUID().slice(0, 8)}`;
  tenants.push(slug);
  return slug;
}

const sims: RunningSimulators[] = [];
let sim: RunningSimulators;
let base: string;
beforeAll(async () => {
  // The simulator and the limiter both at the test time scale (0.001): statistics is 60 ms a token.
  sim = await startSimulators({ marketplace: { pages: (_, family) => (family === "statistics" ? 4 : 12) } });
  sims.push(sim);
  base = `${sim.url}/marketplace`;
});
// Every test starts with the marketplace's circuit breaker closed (an earlier test may have opened it on purpose).
beforeEach(async () => {
  sim.marketplace.reset();
  await connection.del(breakerKey("marketplace"));
});
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  const keys = tenants.flatMap((t) => FAMILIES.map((f) => bucketKey(scopeOf(f, t))));
  if (keys.length > 0) await connection.del(...keys);
  await connection.quit();
  await closeRedis();
});

/** Production time for the limiter: a second statistics request waits 60 s, so it always defers. */
const production = createLimiter({ redis: connection, timeScale: 1 });

async function readAll(
  family: Family,
  tenant: string,
  limiter = createLimiter({ redis: connection }),
): Promise<number> {
  let items = 0;
  for (let page: number | null = 1; page !== null; ) {
    const result = await fetchMarketplacePage({ family, tenant, page, baseUrl: base, limiter });
    items += result.items.length;
    page = result.nextPage;
  }
  return items;
}

describe("fetchMarketplacePage", () => {
  it("reads a tenant's pages through the limiter, following nextPage", async () => {
    expect(await readAll("ads", fresh("all"))).toBe(12 * 20);
    expect(sim.marketplace.stats().accepted).toBe(12);
  });

  it("RateLimitDefer passes through the retry policy untouched (after a 500, the retry's token is a minute away)", async () => {
    const tenant = fresh("defer");
    sim.marketplace.failNext(1);
    const error = await runWithRateLimitDeferral(5_000, () =>
      fetchMarketplacePage({ family: "statistics", tenant, page: 1, baseUrl: base, limiter: production }),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitDefer);
    expect(error).not.toBeInstanceOf(MarketplaceError);
    expect(error).toMatchObject({ name: "RateLimitDefer", scope: `statistics:${tenant}` });
    expect((error as RateLimitDefer).waitMs).toBeGreaterThan(50_000);
    expect(sim.marketplace.stats().accepted).toBe(1);
  });

  it("outside a job, a wait beyond the cap passes through as RateLimitCapExceeded", async () => {
    const tenant = fresh("cap");
    await production.tryAcquire(scopeOf("statistics", tenant));
    const error = await fetchMarketplacePage({
      family: "statistics",
      tenant,
      page: 1,
      baseUrl: base,
      limiter: production,
      maxWaitMs: 30_000,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitCapExceeded);
    expect(error).toMatchObject({ scope: `statistics:${tenant}` });
    expect((error as RateLimitCapExceeded).retryAfterSeconds).toBeGreaterThanOrEqual(60);
    expect(sim.marketplace.stats().accepted).toBe(0);
  });

  it("retries a 5xx and then succeeds; a service that keeps failing is down (its breaker opens), not a bad page", async () => {
    sim.marketplace.failNext(2);
    expect(
      (await fetchMarketplacePage({ family: "orders", tenant: fresh("flaky"), page: 1, baseUrl: base })).items,
    ).toHaveLength(20);
    sim.marketplace.failNext(5);
    const error = await fetchMarketplacePage({ family: "orders", tenant: fresh("down"), page: 1, baseUrl: base }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OutsideServiceDown);
    expect(error).toMatchObject({ service: "marketplace" });
    expect((error as OutsideServiceDown).error).toContain("HTTP 500");
  });

  it("a refused request is not retried", async () => {
    const error = await fetchMarketplacePage({
      family: "orders",
      tenant: fresh("past"),
      page: 13,
      baseUrl: base,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MarketplaceError);
    expect((error as MarketplaceError).details).toMatchObject({ code: "not_found", status: 404, attempts: 1 });
    expect((error as Error).message).toContain("has 12 pages");
  });

  it("an unreachable service is retried, then it is down (OutsideServiceDown); an abort rejects with the signal's reason", async () => {
    const closed = await startSimulators();
    const url = `${closed.url}/marketplace`;
    await closed.close();
    const error = await fetchMarketplacePage({ family: "orders", tenant: fresh("gone"), page: 1, baseUrl: url }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OutsideServiceDown);
    expect((error as OutsideServiceDown).error).toContain("ECONNREFUSED");
    await connection.del(breakerKey("marketplace"));

    const reason = new Error("deadline");
    await expect(
      fetchMarketplacePage({
        family: "orders",
        tenant: fresh("gone"),
        page: 1,
        baseUrl: url,
        signal: AbortSignal.abort(reason),
      }),
    ).rejects.toBe(reason);
  });

  it("an answer that is not a page is a MarketplaceError, not retried", async () => {
    const server = http.createServer((_, res) =>
      res.writeHead(200, { "content-type": "application/json" }).end('{"items":"none"}'),
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const error = await fetchMarketplacePage({ family: "orders", tenant: fresh("odd"), page: 1, baseUrl: url }).catch(
      (e: unknown) => e,
    );
    await new Promise<void>((resolve) => server.close(() => resolve()));
    expect((error as MarketplaceError).details).toMatchObject({ code: "invalid_response", attempts: 1 });
  });

  it("a 429 from the service is counted and retried once after Retry-After; a second one is a MarketplaceError", async () => {
    // A service stricter than the limiter's spec: what a changed marketplace limit would look like.
    const strict = await startSimulators({
      marketplace: { buckets: { ...BUCKETS, statistics: { ...BUCKETS.statistics, windowMs: 2_000_000 } } },
    });
    sims.push(strict);
    const url = `${strict.url}/marketplace`;
    const before = marketplaceClientStats().serverThrottles;
    const tenant = fresh("strict");
    await fetchMarketplacePage({ family: "statistics", tenant, page: 1, baseUrl: url });
    // 60 ms later the service wants 2 s: one 429, then the Retry-After is waited out (in a job, which may wait that long).
    await runWithRateLimitDeferral(10_000, () =>
      fetchMarketplacePage({ family: "statistics", tenant, page: 2, baseUrl: url }),
    );
    expect(marketplaceClientStats().serverThrottles).toBe(before + 1);
    expect(strict.marketplace.violations().total).toBe(1);

    // A service that keeps refusing: the one retry after Retry-After is refused too.
    const refusing = http.createServer((_, res) =>
      res
        .writeHead(429, { "content-type": "application/json", "retry-after": "1", "retry-after-ms": "5" })
        .end('{"error":{"message":"slow down","type":"rate_limited"}}'),
    );
    await new Promise<void>((resolve) => refusing.listen(0, "127.0.0.1", resolve));
    const error = await fetchMarketplacePage({
      family: "ads",
      tenant: fresh("refused"),
      page: 1,
      baseUrl: `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`,
    }).catch((e: unknown) => e);
    await new Promise<void>((resolve) => refusing.close(() => resolve()));
    expect(error).toBeInstanceOf(MarketplaceError);
    expect((error as MarketplaceError).details).toMatchObject({ code: "throttled", status: 429, attempts: 2 });
    expect(marketplaceClientStats().serverThrottles).toBe(before + 3);
  });

  it("a scope read page after page is paced by the answers too: a request that arrived late cannot bring the next one too close", async () => {
    // A limiter that lets everything through leaves only the client's own pacing: requests on
    // one scope never reach the service closer together than its token interval.
    const permissive = { acquire: async () => ({ waitedMs: 0, attempts: 1 }) };
    const tenant = fresh("paced");
    for (let page: number | null = 1; page !== null; ) {
      page = (await fetchMarketplacePage({ family: "statistics", tenant, page, baseUrl: base, limiter: permissive }))
        .nextPage;
    }
    expect(sim.marketplace.stats()).toEqual({
      accepted: 4,
      violations: { total: 0, byFamily: { statistics: 0, orders: 0, ads: 0 }, byScope: {} },
    });
  });

  it("in production time, 20 tenants a family get no more than their bucket's capacity at once, and the rest is deferred, never sent", async () => {
    // Production windows on both sides (statistics: one a minute): no delay on this machine comes
    // close to a token's interval, so what the service sees is decided by the shared spec alone.
    // A threshold (1 s) below every token interval (ads: 2 s): the request after the burst defers.
    const service = await startSimulators({ marketplace: { timeScale: 1, latencyMs: () => 0 } });
    sims.push(service);
    const limiter = createLimiter({ redis: connection, timeScale: 1 });
    const TENANTS = 20;
    const began = Date.now();
    const results = await Promise.all(
      FAMILIES.map(async (family) => {
        const tenantsOfFamily = Array.from({ length: TENANTS }, (_, i) => fresh(`prod${i}`));
        const calls = tenantsOfFamily.flatMap((tenant) =>
          Array.from({ length: BUCKETS[family].capacity + 1 }, (_, i) =>
            runWithRateLimitDeferral(1_000, () =>
              fetchMarketplacePage({
                family,
                tenant,
                page: i + 1,
                baseUrl: `${service.url}/marketplace`,
                limiter,
                timeScale: 1,
              }),
            ),
          ),
        );
        const settled = await Promise.allSettled(calls);
        return { family, settled };
      }),
    );
    // A loaded machine may take longer than a token's interval over the burst (ads: 2 s): a token
    // that came back meanwhile may be spent, never more. And it may answer a token's script later
    // than the limiter's 2 s: the limiter then fails closed, and that call defers too (seen: 193
    // of 200, 126 of 200, 84 of 100 on loaded machines) — how many get through is the machine's;
    // that none goes over, and none refused is sent, is the limiter's. The service is the judge.
    const elapsed = Date.now() - began;
    let sent = 0;
    for (const { family, settled } of results) {
      const { capacity, refillPerWindow, windowMs } = BUCKETS[family];
      const refilled = Math.floor((elapsed * refillPerWindow) / windowMs);
      const fulfilled = settled.filter((r) => r.status === "fulfilled").length;
      expect(fulfilled).toBeGreaterThan(0);
      expect(fulfilled).toBeLessThanOrEqual(TENANTS * (capacity + refilled));
      const deferred = settled.flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : []));
      expect(deferred).toHaveLength(settled.length - fulfilled);
      // Every refusal a deferral; anything else is named with its message.
      expect(deferred.filter((reason) => !(reason instanceof RateLimitDefer)).map(String)).toEqual([]);
      sent += fulfilled;
    }
    expect(service.marketplace.stats()).toEqual({
      accepted: sent,
      violations: { total: 0, byFamily: { statistics: 0, orders: 0, ads: 0 }, byScope: {} },
    });
  });

  it("at the test time scale, 50 tenants paging through the marketplace at once cause no 429", async () => {
    // One sync per tenant, as marketplace_sync runs them, the families taken in turn.
    const syncs = Array.from({ length: 50 }, (_, i) => ({
      tenant: fresh(`many${i}`),
      family: FAMILIES[i % FAMILIES.length]!,
    }));
    const pages = { statistics: 4, orders: 12, ads: 12 } as const;
    const expected = syncs.reduce((n, s) => n + pages[s.family], 0);
    const before = marketplaceClientStats().serverThrottles;
    // The process's shared limiter settings (margin included), as the workers use them.
    const limiter = createLimiter({ redis: connection });
    // Inside a deferral context, as jobs do, with a threshold no wait reaches.
    const counts = await Promise.all(
      syncs.map(({ tenant, family }) => runWithRateLimitDeferral(60_000, () => readAll(family, tenant, limiter))),
    );
    expect(counts.reduce((a, b) => a + b, 0)).toBe(expected * 20);
    expect(sim.marketplace.violations()).toEqual({
      total: 0,
      byFamily: { statistics: 0, orders: 0, ads: 0 },
      byScope: {},
    });
    expect(marketplaceClientStats().serverThrottles).toBe(before);
    expect(sim.marketplace.stats().accepted).toBe(expected);
  });
});
