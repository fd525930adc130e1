import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { providerScope, type LimitedProvider } from "./buckets";
import { runWithRateLimitDeferral } from "./context";
import { NoSpareSlot, RateLimitCapExceeded, RateLimitDefer } from "./errors";
import { bucketKey } from "./limiter";
import {
  createProviderLimiter,
  providerSlotsKey,
  providerWaitersKey,
  providerWaitsKey,
  readProviderStates,
  type ProviderLimiterOptions,
} from "./provider";
import { waitFor } from "@/test/helpers/wait";

const connection = createRedis("producer", { enableOfflineQueue: true });
const PROVIDERS: LimitedProvider[] = ["model", "ocr"];
const keys = PROVIDERS.flatMap((p) => [
  providerSlotsKey(p),
  providerWaitersKey(p),
  bucketKey(providerScope(p)),
  providerWaitsKey(p),
]);

// One provider key per provider under this run's prefix: every test starts from an idle provider.
beforeEach(async () => {
  await connection.del(...keys);
});

afterAll(async () => {
  await connection.del(...keys);
  await connection.quit();
  await closeRedis();
});

/** Production time, limits given here, a fast poll: the numbers below are real milliseconds. */
function limiterWith(concurrency: number, rps: number, options: ProviderLimiterOptions = {}) {
  return createProviderLimiter({
    redis: connection,
    timeScale: 1,
    pollMs: 5,
    limits: { model: { concurrency, rps } },
    ...options,
  });
}

/** Runs `fn` and reports the most calls inside it at once. */
function concurrencyProbe() {
  let now = 0;
  let max = 0;
  return {
    async run(ms: number) {
      now++;
      max = Math.max(max, now);
      try {
        await delay(ms);
      } finally {
        now--;
      }
    },
    max: () => max,
  };
}

describe("withProviderSlot (real Redis)", () => {
  it("never more than C calls in flight under many concurrent callers, and every caller gets its turn", async () => {
    const limiter = limiterWith(5, 100_000);
    const probe = concurrencyProbe();
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => limiter.withSlot("model", () => probe.run(2 + (i % 7)).then(() => i))),
    );
    expect(results).toHaveLength(100);
    expect(probe.max()).toBe(5);
    expect((await limiter.peek("model")).inFlight).toBe(0);
  });

  it("a crashed holder's slot (never released, never renewed) comes back once its lease has run out", async () => {
    const crashedConnection = createRedis("producer", { enableOfflineQueue: false });
    const crashed = limiterWith(2, 100_000, { redis: crashedConnection, leaseMs: 400 });
    const live = limiterWith(2, 100_000, { leaseMs: 400 });
    // Two calls that never end, then the process "dies": no release, no renewal.
    for (let i = 0; i < 2; i++) void crashed.withSlot("model", () => new Promise<never>(() => {})).catch(() => {});
    await expect.poll(async () => (await live.peek("model")).inFlight).toBe(2);
    const diedAt = performance.now();
    crashedConnection.disconnect();

    let ranAt = 0;
    await live.withSlot(
      "model",
      async () => {
        ranAt = performance.now();
      },
      { maxWaitMs: 5_000 },
    );
    // Not before the lease (400 ms from the last renewal, at most ~133 ms before the crash).
    expect(ranAt - diedAt).toBeGreaterThan(400 - 140);
    expect(ranAt - diedAt).toBeLessThan(2_000);
  });

  it("a call longer than its lease keeps its slot: the lease is renewed while it runs", async () => {
    const limiter = limiterWith(1, 100_000, { leaseMs: 300 });
    let release!: () => void;
    const long = limiter.withSlot("model", () => new Promise<void>((resolve) => (release = resolve)));
    await expect.poll(async () => (await limiter.peek("model")).inFlight).toBe(1);
    // Three leases long: a second caller that may wait one second in all finds no free slot.
    const second = limiter.withSlot("model", async () => "ran", { maxWaitMs: 1_000 });
    await expect(second).rejects.toBeInstanceOf(RateLimitCapExceeded);
    release();
    await long;
    expect(await limiter.withSlot("model", async () => "ran")).toBe("ran");
  });

  it("inside a deferral context, a wait for the next token longer than the threshold throws RateLimitDefer and fn never runs", async () => {
    // 0.1 requests a second: one token, the next in 10 s.
    const limiter = limiterWith(4, 0.1);
    await limiter.withSlot("model", async () => {});
    let ran = false;
    const deferred = runWithRateLimitDeferral(50, () =>
      limiter.withSlot("model", async () => {
        ran = true;
      }),
    );
    const err = await deferred.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitDefer);
    expect((err as RateLimitDefer).scope).toBe("provider:model");
    expect((err as RateLimitDefer).waitMs).toBeGreaterThan(9_000);
    expect(ran).toBe(false);
    // The slot taken while the token was asked for is given back with the deferral.
    const state = await limiter.peek("model");
    expect(state.inFlight).toBe(0);
    expect(state.gaveUp).toBe(1);
  });

  it("inside a deferral context, waiting for a free slot longer than the threshold throws RateLimitDefer", async () => {
    const limiter = limiterWith(1, 100_000);
    let release!: () => void;
    const holder = limiter.withSlot("model", () => new Promise<void>((resolve) => (release = resolve)));
    await expect.poll(async () => (await limiter.peek("model")).inFlight).toBe(1);
    const started = performance.now();
    await expect(runWithRateLimitDeferral(100, () => limiter.withSlot("model", async () => {}))).rejects.toBeInstanceOf(
      RateLimitDefer,
    );
    // The short part of the wait was slept first, as the reschedule rule says.
    expect(performance.now() - started).toBeGreaterThan(50);
    release();
    await holder;
  });

  it("a spare slot is taken only when one is free and no call waits for one; a refusal is at once, runs nothing and leaves no waiter", async () => {
    const limiter = limiterWith(2, 100_000);
    let ran = 0;
    const spare = () => limiter.withSlot("model", async () => void ran++, { spare: true, tenant: "hedger" });
    // Free and nobody waiting: taken.
    await spare();
    expect(ran).toBe(1);

    // Every slot held: refused at once, the holders' calls untouched, no waiter recorded.
    const releases: (() => void)[] = [];
    const holders = [1, 2].map(() => limiter.withSlot("model", () => new Promise<void>((r) => releases.push(r))));
    await expect.poll(async () => (await limiter.peek("model")).inFlight).toBe(2);
    const started = performance.now();
    await expect(spare()).rejects.toBeInstanceOf(NoSpareSlot);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(await connection.zcard(providerWaitersKey("model"))).toBe(0);

    // One slot free again, but a call of another tenant waits for one: not taken from it.
    releases.shift()!();
    await expect.poll(async () => (await limiter.peek("model")).inFlight).toBe(1);
    const redisNow = async () => {
      const [sec, micro] = await connection.time();
      return Number(sec) * 1000 + Number(micro) / 1000;
    };
    await connection.zadd(providerWaitersKey("model"), (await redisNow()) + 60_000, "another-tenant");
    await expect(spare()).rejects.toBeInstanceOf(NoSpareSlot);
    expect(ran).toBe(1);
    // Nobody waits any more: the free slot is spare.
    await connection.zrem(providerWaitersKey("model"), "another-tenant");
    await spare();
    expect(ran).toBe(2);
    releases.shift()!();
    await Promise.all(holders);
  });

  it("an aborted signal ends the wait with the signal's reason, unchanged", async () => {
    const limiter = limiterWith(1, 100_000);
    let release!: () => void;
    const holder = limiter.withSlot("model", () => new Promise<void>((resolve) => (release = resolve)));
    await expect.poll(async () => (await limiter.peek("model")).inFlight).toBe(1);
    const reason = new Error("deadline");
    const controller = new AbortController();
    const waiting = limiter.withSlot("model", async () => {}, { signal: controller.signal });
    // Aborted once the call waits for the slot (it is among the waiters), not before it asked.
    await waitFor(async () => (await connection.zcard(providerWaitersKey("model"))) > 0, {
      what: "the second call to wait for the slot",
      timeoutMs: 5_000,
    });
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    release();
    await holder;
  });

  it("the limiter page's provider section reads every provider: in flight now of C, tokens of the burst, waits", async () => {
    const limiter = limiterWith(3, 10);
    let release!: () => void;
    const holder = limiter.withSlot("model", () => new Promise<void>((resolve) => (release = resolve)));
    await expect.poll(async () => (await limiter.peek("model")).inFlight).toBe(1);
    const states = await readProviderStates(limiter);
    expect(states?.map((s) => s.provider)).toEqual(["model", "ocr"]);
    expect(states?.[0]).toMatchObject({
      provider: "model",
      inFlight: 1,
      concurrency: 3,
      capacity: 5,
      rps: 10,
      waits: 0,
      gaveUp: 0,
    });
    expect(states?.[0]?.tokens).toBeGreaterThanOrEqual(4);
    expect(states?.[0]?.tokens).toBeLessThan(5);
    release();
    await holder;
  });

  it("R is respected over a window: the k-th call starts no earlier than (k − burst) / R seconds after the first", async () => {
    const rps = 40;
    const burst = 20; // half a second's worth
    const limiter = limiterWith(1_000, rps);
    const starts: number[] = [];
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 80 }, () => limiter.withSlot("model", async () => void starts.push(performance.now() - t0))),
    );
    starts.sort((a, b) => a - b);
    for (let k = burst; k < starts.length; k++)
      expect(starts[k]!).toBeGreaterThanOrEqual(((k + 1 - burst) / rps) * 1_000 - 5);
    // The waits are counted where the page reads them. How many calls found the bucket empty
    // depends on how fast this machine asked, so only that some did (the burst ran out) is certain.
    const state = await limiter.peek("model");
    expect(state.waits).toBeGreaterThan(0);
    expect(state.waitSeconds).toBeGreaterThan(0);
  });
});
