import { setTimeout as delay } from "node:timers/promises";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { waitFor } from "@/test/helpers/wait";
import { providerScope } from "./buckets";
import { runAsTenant } from "./context";
import { bucketKey } from "./limiter";
import {
  ANONYMOUS_TENANT,
  createProviderLimiter,
  providerSlotsKey,
  providerUrgentKeys,
  providerWaitersKey,
  providerWaitsKey,
  type ProviderLimiter,
  type ProviderLimiterOptions,
} from "./provider";

// The fair share of provider-slots.lua against the real Redis: whoever asks first after a release
// must not decide who gets the slot.
const connection = createRedis("producer", { enableOfflineQueue: true });
const keys = [
  providerSlotsKey("model"),
  providerWaitersKey("model"),
  bucketKey(providerScope("model")),
  providerWaitsKey("model"),
  ...providerUrgentKeys("model"),
];

beforeEach(async () => {
  await connection.del(...keys);
});

// Calls a failed test left holding or waiting would take the next test's slots.
afterEach(async () => {
  await Promise.all(held.splice(0).map((calls) => calls.finishAll()));
});

afterAll(async () => {
  await connection.del(...keys);
  await connection.quit();
  await closeRedis();
});

/** Production time, a generous request rate (only the slots limit here): the numbers below are real milliseconds. */
function limiterWith(concurrency: number, options: ProviderLimiterOptions = {}): ProviderLimiter {
  return createProviderLimiter({
    redis: connection,
    timeScale: 1,
    pollMs: 5,
    limits: { model: { concurrency, rps: 100_000 } },
    ...options,
  });
}

/** Every `heldCalls` of the running test, ended after it. */
const held: { finishAll(): Promise<void> }[] = [];

/** Calls held open until the test ends them (at the latest after the test); `started` gets each call's tenant when it gets its slot. */
function heldCalls(limiter: ProviderLimiter, started: string[] = []) {
  const open = new Map<string, (() => void)[]>();
  const settled: Promise<unknown>[] = [];
  const calls = {
    started,
    /** Starts `n` calls of `tenant` (whose job ends at `deadlineAt`); each holds its slot until `finishOne(tenant)`. */
    start(tenant: string, n: number, deadlineAt?: number) {
      for (let i = 0; i < n; i++) {
        const call = limiter.withSlot(
          "model",
          () =>
            new Promise<void>((resolve) => {
              started.push(tenant);
              open.set(tenant, [...(open.get(tenant) ?? []), resolve]);
            }),
          { tenant, maxWaitMs: 60_000, deadlineAt },
        );
        settled.push(call.catch(() => undefined));
      }
    },
    /** Ends one running call of `tenant`: its slot is released. */
    finishOne(tenant: string) {
      const running = open.get(tenant) ?? [];
      const next = running.shift();
      if (!next) throw new Error(`no running call of ${tenant}`);
      next();
    },
    /** Ends every call, running or still to come. */
    async finishAll() {
      const drain = setInterval(() => {
        for (const running of open.values()) for (const resolve of running.splice(0)) resolve();
      }, 2);
      await Promise.all(settled);
      clearInterval(drain);
    },
  };
  held.push(calls);
  return calls;
}

const waitingTenants = () => connection.zrange(providerWaitersKey("model"), "0", "-1");
const urgentWaiters = () => connection.zcard(providerUrgentKeys("model")[0]);

describe("provider slots: the call with the least time left goes first (real Redis)", () => {
  it("a call within two minutes of its job's deadline takes the next free slot before calls that asked first and more often, whatever its tenant's share", async () => {
    const C = 2;
    const started: string[] = [];
    const others = heldCalls(limiterWith(C), started);
    // The urgent call asks only every 60 ms; the others every 5 ms.
    const urgent = heldCalls(limiterWith(C, { pollMs: 60, waiterTtlMs: 1_000 }), started);
    others.start("tenant-a", C);
    await waitFor(() => started.length === C, { what: "A to hold every slot", timeoutMs: 5_000 });
    others.start("tenant-b", 4);
    await waitFor(async () => (await waitingTenants()).includes("tenant-b"), {
      what: "B to be recorded as waiting",
      timeoutMs: 5_000,
    });
    // A holds both slots, over its share (⌈2 / 2⌉ = 1): without its deadline, B's calls come first.
    const deadlineAt = Date.now() + 30_000;
    urgent.start("tenant-a", 1, deadlineAt);
    await waitFor(async () => (await urgentWaiters()) === 1, { what: "the urgent call to wait", timeoutMs: 5_000 });
    // The limiter page's "waiting now": B waits for its share, A's urgent call for any slot.
    const { waiting } = await limiterWith(C).peek("model");
    expect(waiting).toMatchObject({ urgent: 1, nearestDeadlineAt: deadlineAt });
    expect(waiting.tenants).toBeGreaterThanOrEqual(1);

    others.finishOne("tenant-a");
    await waitFor(() => started.length > C, { what: "the freed slot to be taken", timeoutMs: 5_000 });
    await delay(20);
    expect(started.slice(C)).toEqual(["tenant-a"]);
    expect(await urgentWaiters()).toBe(0);
    expect((await limiterWith(C).peek("model")).waiting).toMatchObject({ urgent: 0, nearestDeadlineAt: null });
    // With no urgent call waiting, the fair share decides again: B, below its share, gets the next one.
    others.finishOne("tenant-a");
    await waitFor(() => started.length > C + 1, { what: "the next freed slot to be taken", timeoutMs: 5_000 });
    expect(started.slice(C + 1)).toEqual(["tenant-b"]);
  });

  it("among urgent calls the earlier deadline goes first; a call far from its deadline is not urgent", async () => {
    const started: string[] = [];
    const holder = heldCalls(limiterWith(1), started);
    const eager = heldCalls(limiterWith(1), started);
    const slow = heldCalls(limiterWith(1, { pollMs: 60, waiterTtlMs: 1_000 }), started);
    holder.start("holder", 1);
    await waitFor(() => started.length === 1, { what: "the slot to be held", timeoutMs: 5_000 });
    // Asking every 5 ms: one with an hour left (not urgent), one with 90 s left.
    eager.start("hour-left", 1, Date.now() + 3_600_000);
    eager.start("late", 1, Date.now() + 90_000);
    // Asking every 60 ms, with 20 s left.
    const earlyDeadline = Date.now() + 20_000;
    slow.start("early", 1, earlyDeadline);
    await waitFor(async () => (await urgentWaiters()) === 2, { what: "both urgent calls to wait", timeoutMs: 5_000 });
    expect((await limiterWith(1).peek("model")).waiting).toMatchObject({ urgent: 2, nearestDeadlineAt: earlyDeadline });

    const next = async (finish: () => void) => {
      const before = started.length;
      finish();
      await waitFor(() => started.length > before, { what: "the freed slot to be taken", timeoutMs: 5_000 });
      await delay(20);
      return started.slice(before);
    };
    expect(await next(() => holder.finishOne("holder"))).toEqual(["early"]);
    expect(await next(() => slow.finishOne("early"))).toEqual(["late"]);
    expect(await next(() => eager.finishOne("late"))).toEqual(["hour-left"]);
  });
});

describe("provider slots: a fair share per tenant (real Redis)", () => {
  it("a tenant holding every slot hands the next freed slots to a small tenant that waits, although its own waiters ask first and more often", async () => {
    const C = 4;
    // A asks every 5 ms with 12 waiting calls; B asks only every 60 ms with 3: without the fair
    // share, A's waiters take every slot A releases long before B asks again.
    const started: string[] = [];
    const big = heldCalls(limiterWith(C), started);
    const small = heldCalls(limiterWith(C, { pollMs: 60, waiterTtlMs: 1_000 }), started);
    big.start("tenant-a", C);
    await waitFor(() => started.length === C, { what: "A to hold every slot", timeoutMs: 5_000 });
    big.start("tenant-a", 12);
    small.start("tenant-b", 3);
    await waitFor(async () => (await waitingTenants()).includes("tenant-b"), {
      what: "B to be recorded as waiting",
      timeoutMs: 5_000,
    });

    // Four rounds: A ends one call; the freed slot goes to B until B holds its share (⌈4 / 2⌉ = 2),
    // then back to A, whose waiters are then the only ones below their share.
    const takers: string[] = [];
    for (let round = 0; round < 4; round++) {
      const before = started.length;
      big.finishOne("tenant-a");
      await waitFor(() => started.length > before, { what: `round ${round}'s slot to be taken`, timeoutMs: 5_000 });
      takers.push(started.at(-1)!);
      // An absence, so a clock: the pollers ask a few more times, and a slot that is not free is taken by nobody.
      await delay(20);
      expect(started.length).toBe(before + 1);
    }
    expect(takers).toEqual(["tenant-b", "tenant-b", "tenant-a", "tenant-a"]);

    // B's third call gets the slot B's own first call gives back: B is below its share again.
    const before = started.length;
    small.finishOne("tenant-b");
    await waitFor(() => started.length > before, { what: "the freed slot to be taken", timeoutMs: 5_000 });
    expect(started.slice(before)).toEqual(["tenant-b"]);
  });

  it("two busy tenants converge to equal shares, however many more waiting calls one of them has", async () => {
    const C = 8;
    const limiter = limiterWith(C);
    // The callers run until the samples are taken: a count, not a clock, so a loaded machine that
    // is slow to get B its first slot still samples the same number of times.
    let stopped = false;
    const busy = async (tenant: string) => {
      while (!stopped)
        await limiter.withSlot("model", () => delay(5 + Math.random() * 10), { tenant, maxWaitMs: 60_000 });
    };
    // A starts first with three times B's callers and fills every slot; B joins then.
    const running = Array.from({ length: 24 }, () => busy("tenant-a"));
    await waitFor(async () => (await limiter.peek("model")).inFlightByTenant["tenant-a"] === C, {
      what: "A to fill every slot",
      timeoutMs: 5_000,
    });
    running.push(...Array.from({ length: 8 }, () => busy("tenant-b")));
    await waitFor(async () => ((await limiter.peek("model")).inFlightByTenant["tenant-b"] ?? 0) > 0, {
      what: "B to get a slot",
      timeoutMs: 5_000,
    });
    // The shares are sampled once they have met (B holds its half, or more, once): how long the
    // pollers take to get there depends on the machine; what is checked is that they stay there.
    await waitFor(async () => ((await limiter.peek("model")).inFlightByTenant["tenant-b"] ?? 0) >= C / 2, {
      what: "B to reach its share",
      timeoutMs: 10_000,
    });

    const samples: { a: number; b: number }[] = [];
    while (samples.length < 60) {
      const { inFlightByTenant } = await limiter.peek("model");
      samples.push({ a: inFlightByTenant["tenant-a"] ?? 0, b: inFlightByTenant["tenant-b"] ?? 0 });
      await delay(10);
    }
    stopped = true;
    await Promise.all(running);

    const mean = (k: "a" | "b") => samples.reduce((sum, s) => sum + s[k], 0) / samples.length;
    // An equal split is half each; without the share A would hold about three quarters (24 of 32
    // askers). Compared as a fraction of the slots in use: a loaded machine leaves slots idle between
    // a release and the next take, which lowers both counts alike.
    const shareOfB = mean("b") / (mean("a") + mean("b"));
    expect(shareOfB).toBeGreaterThan(3 / 8);
    expect(shareOfB).toBeLessThan(5 / 8);
    expect(mean("a") + mean("b")).toBeGreaterThan(C / 2);
    expect(Math.max(...samples.map((s) => s.a + s.b))).toBeLessThanOrEqual(C);
  });

  it("a lone tenant gets every slot, and a tenant over its share takes free slots nobody else waits for: no capacity is left idle", async () => {
    const C = 4;
    const limiter = limiterWith(C);
    const calls = heldCalls(limiter);
    // B holds one slot and waits for no more: A may take the other three, over its share of two.
    calls.start("tenant-b", 1);
    await waitFor(() => calls.started.length === 1, { what: "B's call to start", timeoutMs: 5_000 });
    calls.start("tenant-a", 10);
    await waitFor(() => calls.started.length === C, { what: "every slot to be taken", timeoutMs: 5_000 });
    expect((await limiter.peek("model")).inFlightByTenant).toEqual({ "tenant-a": 3, "tenant-b": 1 });
    await calls.finishAll();

    // Alone, a tenant uses every slot at once.
    let now = 0;
    let max = 0;
    await Promise.all(
      Array.from({ length: 20 }, () =>
        limiter.withSlot(
          "model",
          async () => {
            max = Math.max(max, ++now);
            await delay(5);
            now--;
          },
          { tenant: "tenant-a" },
        ),
      ),
    );
    expect(max).toBe(C);
  });

  it("a call names its tenant by option, else by runAsTenant, else it counts as the anonymous tenant", async () => {
    const limiter = limiterWith(4);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const hold = () => released;
    const running = [
      limiter.withSlot("model", hold, { tenant: "by-option" }),
      runAsTenant("by-context", () => limiter.withSlot("model", hold)),
      runAsTenant("by-context", () => limiter.withSlot("model", hold, { tenant: "option-wins" })),
      limiter.withSlot("model", hold),
    ];
    await waitFor(async () => (await limiter.peek("model")).inFlight === 4, {
      what: "four calls in flight",
      timeoutMs: 5_000,
    });
    expect((await limiter.peek("model")).inFlightByTenant).toEqual({
      "by-option": 1,
      "by-context": 1,
      "option-wins": 1,
      [ANONYMOUS_TENANT]: 1,
    });
    release();
    await Promise.all(running);
    await expect(limiter.withSlot("model", async () => 1, { tenant: "a|b" })).rejects.toBeInstanceOf(RangeError);
  });
});
