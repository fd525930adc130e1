import { randomUUID } from "node:crypto";
import net from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { toErrorResponse } from "@/lib/http/api";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { scopeOf, type Family } from "./buckets";
import { runWithRateLimitDeferral } from "./context";
import { RateLimitCapExceeded, RateLimitDefer } from "./errors";
import { commandsSent } from "@/test/helpers/monitor";
import { acquire, bucketKey, createLimiter, maxWaitMs, peekBucket, scopesIndexKey, tryAcquire } from "./limiter";

const connection = createRedis("producer", { enableOfflineQueue: true });
const scopes: string[] = [];

/** A scope no other test (or run) uses. */
function fresh(family: Family): string {
  const scope = scopeOf(family, `t-${randomUUID().slice(0, 8)}`);
  scopes.push(scope);
  return scope;
}

afterAll(async () => {
  if (scopes.length > 0) await connection.del(...scopes.map(bucketKey));
  await connection.quit();
  await closeRedis();
});

/** Production time, no margin: the script's numbers can be checked exactly without waiting. */
const production = createLimiter({ redis: connection, timeScale: 1, marginMs: 0 });

describe("the token-bucket script (tryAcquire)", () => {
  it("a new bucket is full: capacity requests pass at once, the next is refused with the wait for one token", async () => {
    const scope = fresh("orders");
    for (let i = 0; i < 10; i++) expect(await production.tryAcquire(scope)).toEqual({ acquired: true });
    const refused = await production.tryAcquire(scope);
    expect(refused.acquired).toBe(false);
    // 10 per 60 s: one token every 6 s, minus the few ms the calls took.
    expect(!refused.acquired && refused.waitMs).toBeGreaterThan(5_900);
    expect(!refused.acquired && refused.waitMs).toBeLessThanOrEqual(6_000);
  });

  it("statistics: one request per 60 s window; the second waits the window", async () => {
    const scope = fresh("statistics");
    expect(await production.tryAcquire(scope)).toEqual({ acquired: true });
    const refused = await production.tryAcquire(scope);
    expect(refused).toEqual({ acquired: false, waitMs: expect.any(Number) });
    expect(!refused.acquired && refused.waitMs).toBeGreaterThan(59_900);
    expect(!refused.acquired && refused.waitMs).toBeLessThanOrEqual(60_000);
  });

  it("cost takes that many tokens, and the wait is for `cost` tokens, not one", async () => {
    const scope = fresh("ads");
    expect(await production.tryAcquire(scope, 3)).toEqual({ acquired: true });
    const refused = await production.tryAcquire(scope, 3); // 2 left, 1 more takes 2 s
    expect(!refused.acquired && refused.waitMs).toBeGreaterThan(1_900);
    expect(!refused.acquired && refused.waitMs).toBeLessThanOrEqual(2_000);
    expect(await production.tryAcquire(scope, 2)).toEqual({ acquired: true });
    const empty = await production.tryAcquire(scope, 5); // 0 left, 5 take 10 s
    expect(!empty.acquired && empty.waitMs).toBeGreaterThan(9_900);
    expect(!empty.acquired && empty.waitMs).toBeLessThanOrEqual(10_000);
  });

  it("a cost the bucket can never hold, or a malformed scope, is a bug: RangeError", async () => {
    await expect(production.tryAcquire(fresh("ads"), 6)).rejects.toThrow(RangeError);
    await expect(production.tryAcquire(fresh("ads"), 0)).rejects.toThrow(RangeError);
    await expect(production.tryAcquire("refunds:acme")).rejects.toThrow(RangeError);
  });

  it("refills continuously with time, never above capacity", async () => {
    const slow = createLimiter({ redis: connection, timeScale: 0.1, marginMs: 0 }); // statistics: 6 s a token
    const scope = fresh("statistics");
    const before = performance.now();
    expect(await slow.tryAcquire(scope)).toEqual({ acquired: true });
    const taken = performance.now();
    await delay(300); // elapsed time is the input here: the bucket refills with it
    const peeking = performance.now();
    const part = await slow.peekBucket(scope);
    const peeked = performance.now();
    // A 20th of a token per 300 ms, whatever the exact elapsed time was.
    expect(part.tokens).toBeGreaterThanOrEqual((peeking - taken) / 6_000 - 0.001);
    expect(part.tokens).toBeLessThanOrEqual((peeked - before) / 6_000 + 0.001);
    const refused = await slow.tryAcquire(scope);
    const asked = performance.now();
    // The wait is what is left of the 6 s: neither faster nor slower than the elapsed time allows.
    expect(!refused.acquired && refused.waitMs).toBeLessThanOrEqual(Math.ceil(6_000 - (peeking - taken)));
    expect(!refused.acquired && refused.waitMs).toBeGreaterThanOrEqual(Math.floor(6_000 - (asked - before)));

    const fast = createLimiter({ redis: connection, timeScale: 0.01, marginMs: 0 }); // statistics: 600 ms a token
    const other = fresh("statistics");
    await fast.tryAcquire(other);
    const wait = await fast.tryAcquire(other);
    expect(wait.acquired).toBe(false);
    await delay(!wait.acquired ? wait.waitMs : 0); // the rule: after exactly the wait it named, a token is there
    expect(await fast.tryAcquire(other)).toEqual({ acquired: true });

    const orders = fresh("orders"); // 600 ms a window of 10
    for (let i = 0; i < 10; i++) await fast.tryAcquire(orders);
    await delay(1_300); // two windows of elapsed time (the input): still only a bucket's worth
    expect((await fast.peekBucket(orders)).tokens).toBe(10);
    for (let i = 0; i < 10; i++) expect(await fast.tryAcquire(orders)).toEqual({ acquired: true });
    expect((await fast.tryAcquire(orders)).acquired).toBe(false);
  });

  it("keeps its state under the configured prefix with a hash tag, and lets idle buckets expire", async () => {
    const scope = fresh("orders");
    await production.tryAcquire(scope);
    expect(bucketKey(scope)).toBe(`${process.env.BOUNDED_REDIS_PREFIX}:ratelimit:{${scope}}`);
    const pttl = await connection.pttl(bucketKey(scope));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(61_000); // the time to refill a whole bucket + 1 s
    // The clock is Redis's: the stored time is within Redis TIME of now.
    const [seconds] = await connection.time();
    expect(Math.abs(Number(await connection.hget(bucketKey(scope), "ts")) - Number(seconds) * 1000)).toBeLessThan(
      2_000,
    );
  });

  it("loads the script with EVAL when Redis has forgotten it (NOSCRIPT)", async () => {
    await connection.script("FLUSH");
    expect(await production.tryAcquire(fresh("orders"))).toEqual({ acquired: true });
  });
});

describe("peekBucket", () => {
  it("reads without writing: an unused scope stays absent, a used one shows tokens and the next token", async () => {
    const unused = fresh("statistics");
    expect(await production.peekBucket(unused)).toMatchObject({
      tokens: 1,
      nextTokenInMs: 0,
      fullInMs: 0,
      active: false,
      family: "statistics",
    });
    expect(await connection.exists(bucketKey(unused))).toBe(0);

    const used = fresh("statistics");
    await production.tryAcquire(used);
    const before = await connection.hgetall(bucketKey(used));
    const state = await production.peekBucket(used);
    expect(state.active).toBe(true);
    expect(state.tokens).toBeLessThan(0.01);
    expect(state.nextTokenInMs).toBeGreaterThan(59_000);
    expect(await connection.hgetall(bucketKey(used))).toEqual(before);
    expect(await production.listActiveScopes()).toContain(used);
  });

  it("the module-level functions use the process's time scale", async () => {
    const scope = fresh("statistics");
    await tryAcquire(scope);
    expect((await peekBucket(scope)).nextTokenInMs).toBeLessThanOrEqual(60); // 60 s and a 0.25 s margin at 0.001
  });
});

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("listActiveScopes", () => {
  // Statistics at 1/100 of production time: one token, back in 600 ms; its bucket lapses 1.6 s after its last use.
  const fast = () => createLimiter({ redis: connection, timeScale: 0.01, marginMs: 0 });

  it("lists the scopes used, sorted, at most `limit`; a lapsed bucket drops out, and the index always expires", async () => {
    const limiter = fast();
    const [a, b, c] = [fresh("statistics"), fresh("statistics"), fresh("statistics")];
    for (const scope of [b, a]) await limiter.tryAcquire(scope);
    expect((await limiter.listActiveScopes()).filter((s) => [a, b].includes(s))).toEqual([a, b].sort());
    await limiter.tryAcquire(c);
    expect(await limiter.listActiveScopes()).toContain(c);
    expect(await limiter.listActiveScopes(1)).toHaveLength(1);
    expect(await connection.pttl(scopesIndexKey())).toBeGreaterThan(0);

    // A bucket of production time keeps the index itself alive (61 s) while these lapse (1.6 s).
    await production.tryAcquire(fresh("statistics"));
    await delay(1_700);
    expect(await limiter.listActiveScopes()).not.toContain(a);
    // The next scope new to the index drops the lapsed ones from it.
    await limiter.tryAcquire(fresh("statistics"));
    expect(await connection.zscore(scopesIndexKey(), a)).toBeNull();
    expect(await connection.zscore(scopesIndexKey(), b)).toBeNull();
  });

  it("a bucket used again stays listed for as long as it has state, whatever else the index held", async () => {
    // Statistics at 1/20 of production time: a token every 3 s; a bucket lapses 4 s after its last use.
    const limiter = createLimiter({ redis: connection, timeScale: 0.05, marginMs: 0 });
    await connection.del(scopesIndexKey());
    const scope = fresh("statistics");
    await limiter.tryAcquire(scope);
    await delay(1_500);
    await limiter.tryAcquire(scope); // refused or not, its bucket is written again: it lapses at 5.5 s
    await delay(3_250);
    expect(await connection.exists(bucketKey(scope))).toBe(1);
    expect(await limiter.listActiveScopes()).toContain(scope);
  });

  it("is one command on the index, never a SCAN of the keyspace", async () => {
    const limiter = fast();
    const scope = fresh("statistics");
    await limiter.tryAcquire(scope);
    const { result, sent } = await commandsSent(connection, (reader) =>
      createLimiter({ redis: reader, timeScale: 0.01 }).listActiveScopes(),
    );
    expect(result).toContain(scope);
    // EVALSHA, or EVAL once after a Redis that did not know the script yet.
    expect(sent.filter((command) => command !== "eval")).toEqual(["evalsha"]);
  });
});

describe("tryAcquire never throws for Redis trouble", () => {
  it("Redis unreachable: not acquired, retry in REDIS_ERROR_RETRY_MS (scaled)", async () => {
    const dead = new Redis({
      host: "127.0.0.1",
      port: await closedPort(),
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      lazyConnect: true,
      retryStrategy: () => null,
    });
    dead.on("error", () => {});
    const limiter = createLimiter({ redis: dead, timeScale: 0.01 });
    expect(await limiter.tryAcquire(scopeOf("orders", "acme"))).toEqual({ acquired: false, waitMs: 10 });
    expect(await limiter.tryAcquire(scopeOf("orders", "acme"))).toEqual({ acquired: false, waitMs: 10 });
    dead.disconnect();
  });

  // A connection without a command timeout of its own (the limiter's timer gives up), and one with
  // one, as the process's shared connection has (ioredis gives up; the limiter adds no timer).
  it.each([
    ["no command timeout of its own", {}],
    ["its own command timeout", { commandTimeout: 100 }],
  ])(
    "Redis that accepts but never answers, on a connection with %s: not acquired after the timeout",
    async (_, own) => {
      const sockets: net.Socket[] = [];
      const silent = net.createServer((socket) => sockets.push(socket));
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      const client = new Redis({
        host: "127.0.0.1",
        port: (silent.address() as net.AddressInfo).port,
        maxRetriesPerRequest: 1,
        lazyConnect: true,
        ...own,
      });
      client.on("error", () => {});
      const limiter = createLimiter({ redis: client, timeScale: 0.01, redisTimeoutMs: 100 });
      expect(await limiter.tryAcquire(scopeOf("orders", "acme"))).toEqual({ acquired: false, waitMs: 10 });
      client.disconnect();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    },
  );
});

describe("acquire: the waiting policy", () => {
  it("inside a job, a wait longer than the threshold throws RateLimitDefer with the remaining wait", async () => {
    const scope = fresh("statistics");
    await production.tryAcquire(scope);
    const error = await runWithRateLimitDeferral(5_000, () => production.acquire(scope)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitDefer);
    expect(error).toMatchObject({ name: "RateLimitDefer", scope });
    expect((error as RateLimitDefer).waitMs).toBeGreaterThan(59_000);
    expect((error as RateLimitDefer).waitMs).toBeLessThanOrEqual(60_000);
  });

  it("inside a job, a wait within the threshold is slept through, then the token is taken", async () => {
    const limiter = createLimiter({ redis: connection, timeScale: 0.01 }); // statistics: 603 ms a token
    const scope = fresh("statistics");
    await limiter.tryAcquire(scope);
    const acquired = await runWithRateLimitDeferral(5_000, () => limiter.acquire(scope));
    expect(acquired.attempts).toBeGreaterThanOrEqual(2);
    expect(acquired.waitedMs).toBeGreaterThan(0);
    expect((await limiter.peekBucket(scope)).tokens).toBeLessThan(0.5);
  });

  it("two concurrent jobs with different thresholds: one defers, the other sleeps", async () => {
    const limiter = createLimiter({ redis: connection, timeScale: 0.01 }); // statistics: 603 ms a token
    const a = fresh("statistics");
    const b = fresh("statistics");
    await Promise.all([limiter.tryAcquire(a), limiter.tryAcquire(b)]);
    // Timer awaits, so each job's context has to survive the other job running in between.
    const [short, long] = await Promise.allSettled([
      runWithRateLimitDeferral(1, async () => {
        await delay(5);
        return limiter.acquire(a);
      }),
      runWithRateLimitDeferral(10_000, async () => {
        await delay(1);
        return limiter.acquire(b);
      }),
    ]);
    expect(short.status === "rejected" && short.reason).toBeInstanceOf(RateLimitDefer);
    expect(long.status).toBe("fulfilled");
  });

  it("outside a job, a wait beyond the cap throws RateLimitCapExceeded (an HTTP 429 with Retry-After)", async () => {
    const scope = fresh("statistics");
    await production.tryAcquire(scope);
    const error = await production.acquire(scope, { maxWaitMs: 30_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitCapExceeded);
    expect(error).toMatchObject({ scope, retryAfterSeconds: 60 });
    expect(maxWaitMs()).toBe(125); // 125 s production at time scale 0.001

    const response = toErrorResponse(error, "test");
    expect(response.status).toBe(429);
    expect(response.headers.get("retry-after")).toBe("60");
    expect(await response.json()).toEqual({ error: { code: "rate_limited", message: (error as Error).message } });
  });

  it("outside a job, a wait below the cap is slept through", async () => {
    const limiter = createLimiter({ redis: connection, timeScale: 0.01 }); // statistics: 603 ms a token, cap 1,250 ms
    const scope = fresh("statistics");
    await limiter.tryAcquire(scope);
    const acquired = await limiter.acquire(scope);
    expect(acquired.attempts).toBeGreaterThanOrEqual(2);
    expect(acquired.waitedMs).toBeGreaterThan(0);
    // The module's functions at the test scale: a statistics wait (≤ 60 ms) is under the 125 ms cap.
    const other = fresh("statistics");
    await tryAcquire(other);
    await expect(acquire(other)).resolves.toMatchObject({ attempts: expect.any(Number) });
  });

  it("a sleep is aborted by the signal, rejecting with its reason unchanged", async () => {
    const limiter = createLimiter({ redis: connection, timeScale: 0.1 }); // statistics: 6 s a token
    const scope = fresh("statistics");
    await limiter.tryAcquire(scope);
    const reason = new Error("deadline");
    const controller = new AbortController();
    // A clock on purpose: the abort lands during the 6 s sleep, which has no state to wait for.
    setTimeout(() => controller.abort(reason), 20);
    await expect(limiter.acquire(scope, { signal: controller.signal })).rejects.toBe(reason);
  });
});
