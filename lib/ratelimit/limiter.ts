import { env } from "@/lib/env";
import { describeError } from "@/lib/format/describe";
import { logger } from "@/lib/log";
import { key, redis, type RedisClient } from "@/lib/redis/client";
import { scaled, sleep } from "@/lib/time";
import {
  BUCKETS,
  bucketRate,
  parseProviderScope,
  parseScope,
  providerBucketSpec,
  providerLimits,
  type BucketRate,
  type BucketSpec,
  type Family,
  type LimitedProvider,
  type ProviderLimits,
} from "./buckets";
import { deferralThreshold } from "./context";
import { RateLimitCapExceeded, RateLimitDefer } from "./errors";
import { luaSource, runLua, type LuaScript } from "@/lib/redis/lua";
import { luaScript, withTimeout } from "./scripts";

const log = logger("ratelimit");

/** Inside a job, a wait longer than this (production ms) gives the worker slot back. */
export const DEFER_THRESHOLD_MS = 5_000;
/**
 * Outside a job, the longest a caller waits in all (production ms) before `RateLimitCapExceeded`:
 * two statistics windows with their margins (a caller that loses the race for the next token
 * waits a second one) and a little more — the longest wait ever seen in production, ~125 s.
 */
const MAX_WAIT_MS = 125_000;
/**
 * What `tryAcquire` answers when Redis cannot be asked (production ms): "not now, ask again
 * shortly". The limiter fails closed: without Redis nobody can know whether a token is left,
 * and a burst of unchecked calls is what earns the tenant a ban at the marketplace.
 */
export const REDIS_ERROR_RETRY_MS = 1_000;

/**
 * The shortest deferral threshold in real milliseconds, whatever the time scale. Giving the slot
 * back costs a few database writes and a queue move, which do not shrink with the time scale: at
 * a small scale, a wait shorter than that cost is cheaper slept than rescheduled (and items in
 * flight that wait a moment for a provider slot would otherwise bounce their job to *delayed*).
 * At time scale 1 the scaled threshold (5 s) is far above it.
 */
export const MIN_DEFER_THRESHOLD_REAL_MS = 250;

/** `DEFER_THRESHOLD_MS` in real (time-scaled) milliseconds, floored: the threshold to give `runWithRateLimitDeferral`. */
export function deferThresholdMs(): number {
  return Math.max(scaled(DEFER_THRESHOLD_MS), MIN_DEFER_THRESHOLD_REAL_MS);
}

/**
 * Production milliseconds added to each token's interval over the marketplace's own limit.
 * Two requests granted one interval apart reach the service closer together when the first
 * was delayed on its way and the second was not: a new TLS connection against a pooled one, a
 * retransmit, a busy event loop — each ~100–300 ms. Costs 0.4 % of the statistics rate, 4 % of
 * orders and 12 % of ads; one 429 costs more (it is a bug signal, and marketplaces ban sellers
 * that keep exceeding their limits). Time-scaled like every other duration, so tests and demos
 * keep the production ratios; there, the marketplace client's own pacing of one scope's
 * consecutive requests (lib/marketplace/client.ts) covers the delays of a busy machine.
 */
const MARGIN_MS = 250;

/** `MAX_WAIT_MS` in real (time-scaled) milliseconds: the default cap of `acquire` outside a job. */
export function maxWaitMs(timeScale: number = env().BOUNDED_TIME_SCALE): number {
  return scaled(MAX_WAIT_MS, timeScale);
}

export type TryAcquireResult = { acquired: true } | { acquired: false; waitMs: number };

export interface AcquireOptions {
  /** Tokens to take (1 ≤ cost ≤ the bucket's capacity). @defaultValue 1 */
  cost?: number;
  /** Aborts a sleep between attempts; the promise then rejects with `signal.reason`, unchanged. */
  signal?: AbortSignal;
  /**
   * Outside a deferral context: the longest the caller waits in all, in real milliseconds; a
   * wait that would go beyond throws `RateLimitCapExceeded`. Ignored inside a deferral context.
   * @defaultValue `maxWaitMs()` (125 s production, time-scaled)
   */
  maxWaitMs?: number;
}

export interface Acquired {
  /** Real milliseconds slept before the tokens were taken. */
  waitedMs: number;
  /** `tryAcquire` calls made (1 when a token was there at once). */
  attempts: number;
}

/** A scope's family: a marketplace endpoint family, or `provider` for `provider:<name>` scopes. */
export type ScopeFamily = Family | "provider";

/** What `peekBucket` reads: a bucket's state now, without taking anything. */
export interface BucketState {
  scope: string;
  family: ScopeFamily;
  tenant: string;
  capacity: number;
  /** Tokens now, fractional. */
  tokens: number;
  /** Real milliseconds until a whole token is available; 0 when one is. */
  nextTokenInMs: number;
  /** Real milliseconds until the bucket is full again; 0 when it is. */
  fullInMs: number;
  /** False when Redis holds no state for the scope (unused for a while: the bucket is full). */
  active: boolean;
}

export interface LimiterOptions {
  /** @defaultValue the process's shared connection, `redis()` */
  redis?: RedisClient;
  /** @defaultValue `env().BOUNDED_TIME_SCALE` */
  timeScale?: number;
  /** Real milliseconds added to each token's interval. @defaultValue `MARGIN_MS` (250), time-scaled */
  marginMs?: number;
  /** Real milliseconds after which an unanswered Redis call counts as an error. @defaultValue 2000 */
  redisTimeoutMs?: number;
  /** Limits of `provider:<name>` scopes, per provider. @defaultValue `providerLimits(provider)` (the environment) */
  providerLimits?: Partial<Record<LimitedProvider, ProviderLimits>>;
}

export interface Limiter {
  tryAcquire(scope: string, cost?: number): Promise<TryAcquireResult>;
  acquire(scope: string, options?: AcquireOptions): Promise<Acquired>;
  peekBucket(scope: string): Promise<BucketState>;
  /** The scopes that have state in Redis now (at most `limit`: those that lapse last), sorted. */
  listActiveScopes(limit?: number): Promise<string[]>;
  /** The rate the limiter enforces for a family, in real milliseconds (margin included). */
  rate(family: Family): BucketRate;
}

/**
 * The Redis key of a scope's bucket, the token-bucket script's first key. On a Redis Cluster the
 * prefix's hash tag comes first and decides the slot (every Bounded key shares it, the scopes
 * index too). The braces around the scope are kept from when the page found buckets by a SCAN:
 * a new name would give every tenant a full bucket again at a deploy.
 */
export function bucketKey(scope: string): string {
  return key("ratelimit", `{${scope}}`);
}

/** The sorted set of scopes whose buckets have a hash, by when each lapses (token-bucket.lua's KEYS[2]). */
export function scopesIndexKey(): string {
  return key("ratelimit-scopes");
}

/** ARGV: at most how many. The scopes whose buckets have not lapsed by Redis's clock, those that lapse last first. */
const LIVE_SCOPES = luaSource(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
return redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', '(' .. now, 'LIMIT', 0, tonumber(ARGV[1]))`);

/** A scope's bucket as the token-bucket script is called for it (real ms). */
interface ScopeCall {
  family: ScopeFamily;
  key: string;
  capacity: number;
  refillPerMs: number;
  ttlMs: number;
}

/**
 * Whether `client` gives up on a command by itself within `ms` (ioredis's `commandTimeout`, which
 * the process's shared connection has: lib/redis/client.ts): then a call needs no timer of its own.
 */
function answersWithin(client: RedisClient, ms: number): boolean {
  const options = client.options as { commandTimeout?: number; redisOptions?: { commandTimeout?: number } };
  const own = options.commandTimeout ?? options.redisOptions?.commandTimeout;
  return own !== undefined && own <= ms;
}

/** Scopes a limiter keeps worked out at once; past it, it starts over. */
const MAX_KEPT_SCOPES = 10_000;

interface ResolvedScope {
  family: ScopeFamily;
  tenant: string;
  spec: BucketSpec;
  /** Real milliseconds added to each token's interval: the limiter's margin for the marketplace, none for a provider. */
  marginMs: number;
}

/** What `createLimiter` hands out: its settings, the scopes it has worked out and whether Redis is failing. */
class TokenBucketLimiter {
  private readonly timeScale: number;
  private readonly marginMs: number;
  private readonly redisTimeoutMs: number;
  private readonly errorRetryMs: number;
  private readonly tokenBucket: LuaScript;
  /**
   * What the token-bucket script is given for a scope, worked out once per scope: its family's
   * spec and this limiter's rate never change within the process, and a call then costs the
   * script's round trip and little else (bench:limiter compares it with a bare EVALSHA).
   */
  private readonly scopeCalls = new Map<string, ScopeCall>();
  /** The last call could not reach Redis: the outage is logged once, and its end once. */
  private failing = false;

  /** Reads the options' defaults once (time scale, margin, timeouts) and the token-bucket script. */
  constructor(private readonly options: LimiterOptions) {
    this.timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
    this.marginMs = options.marginMs ?? scaled(MARGIN_MS, this.timeScale);
    this.redisTimeoutMs = options.redisTimeoutMs ?? 2_000;
    this.errorRetryMs = Math.max(1, scaled(REDIS_ERROR_RETRY_MS, this.timeScale));
    this.tokenBucket = luaScript("token-bucket.lua");
  }

  /** The Redis connection, asked for at each call: the options' own, or the process's shared one. */
  private client(): RedisClient {
    return this.options.redis ?? redis();
  }

  /** The rate the limiter enforces for a family, in real milliseconds (margin included). */
  rate(family: Family): BucketRate {
    return bucketRate(BUCKETS[family], this.timeScale, this.marginMs);
  }

  /**
   * A marketplace scope (`family:tenant`) or a provider scope (`provider:model`). A provider's
   * bucket takes no margin: its spare burst covers what the margin covers for the marketplace.
   */
  private specOf(scope: string): ResolvedScope {
    const provider = parseProviderScope(scope);
    if (provider) {
      const limits = this.options.providerLimits?.[provider] ?? providerLimits(provider);
      return { family: "provider", tenant: provider, spec: providerBucketSpec(provider, limits), marginMs: 0 };
    }
    const parsed = parseScope(scope);
    if (!parsed)
      throw new RangeError(
        `not a rate-limit scope (family:tenant with a known family, or provider:<name>): ${JSON.stringify(scope)}`,
      );
    return { ...parsed, marginMs: this.marginMs };
  }

  /** A resolved scope's rate in real milliseconds, with its own margin. */
  private rateOf(resolved: ResolvedScope): BucketRate {
    return bucketRate(resolved.spec, this.timeScale, resolved.marginMs);
  }

  /** What the token-bucket script is given for a scope, kept in `scopeCalls` after the first call. */
  private scopeCall(scope: string): ScopeCall {
    const kept = this.scopeCalls.get(scope);
    if (kept) return kept;
    const resolved = this.specOf(scope);
    const { capacity, refillPerMs } = this.rateOf(resolved);
    const call = {
      family: resolved.family,
      key: bucketKey(scope),
      capacity,
      refillPerMs,
      ttlMs: Math.ceil(capacity / refillPerMs) + 1_000,
    };
    // Scopes name tenants: a process that met very many starts over rather than grow without end.
    if (this.scopeCalls.size >= MAX_KEPT_SCOPES) this.scopeCalls.clear();
    this.scopeCalls.set(scope, call);
    return call;
  }

  /** Takes `cost` tokens if the bucket has them; never waits, never rejects for Redis trouble (fails closed). */
  async tryAcquire(scope: string, cost = 1): Promise<TryAcquireResult> {
    const call = this.scopeCall(scope);
    if (!Number.isInteger(cost) || cost < 1 || cost > call.capacity) {
      throw new RangeError(`cost must be a whole number from 1 to ${call.capacity} for ${call.family}, got ${cost}`);
    }
    let reply: [number, number];
    try {
      // The only call site of the token-bucket script.
      const client = this.client();
      const sent = runLua<[number, number]>(
        client,
        this.tokenBucket,
        [call.key, scopesIndexKey()],
        [call.capacity, call.refillPerMs, cost, call.ttlMs, scope],
      );
      reply = answersWithin(client, this.redisTimeoutMs) ? await sent : await withTimeout(sent, this.redisTimeoutMs);
    } catch (err) {
      // Logged once per outage, not once per call: every waiting job asks again every second.
      if (!this.failing)
        log.error(
          { scope, error: describeError(err), retryInMs: this.errorRetryMs },
          "rate limiter cannot reach Redis; refusing tokens until it can",
        );
      this.failing = true;
      return { acquired: false, waitMs: this.errorRetryMs };
    }
    if (this.failing) log.info({ scope }, "rate limiter reached Redis again");
    this.failing = false;
    const [acquired, waitMs] = reply;
    return acquired === 1 ? { acquired: true } : { acquired: false, waitMs: Math.max(1, Number(waitMs)) };
  }

  /** `tryAcquire` again and again, with `waitForRateLimit` between, until the tokens are taken. */
  async acquire(scope: string, acquireOptions: AcquireOptions = {}): Promise<Acquired> {
    const { cost = 1, signal } = acquireOptions;
    let waitedMs = 0;
    for (let attempts = 1; ; attempts++) {
      signal?.throwIfAborted();
      const result = await this.tryAcquire(scope, cost);
      if (result.acquired) return { waitedMs: Math.round(waitedMs), attempts };
      waitedMs += await waitForRateLimit(scope, result.waitMs, {
        waitedMs,
        signal,
        maxWaitMs: acquireOptions.maxWaitMs ?? maxWaitMs(this.timeScale),
      });
    }
  }

  /** A bucket's state now: HMGET + Redis TIME, the refill computed here, nothing written. */
  async peekBucket(scope: string): Promise<BucketState> {
    const resolved = this.specOf(scope);
    const { family, tenant } = resolved;
    const { capacity, refillPerMs } = this.rateOf(resolved);
    const [state, time] = await withTimeout(
      Promise.all([this.client().hmget(bucketKey(scope), "tokens", "ts"), this.client().time()]),
      this.redisTimeoutMs,
    );
    const now = Number(time[0]) * 1000 + Number(time[1]) / 1000;
    const [storedTokens, storedTs] = state;
    const active = storedTokens != null && storedTs != null;
    const tokens = active
      ? Math.min(capacity, Number(storedTokens) + Math.max(0, now - Number(storedTs)) * refillPerMs)
      : capacity;
    return {
      scope,
      family,
      tenant,
      capacity,
      tokens,
      nextTokenInMs: tokens >= 1 ? 0 : Math.ceil((1 - tokens) / refillPerMs),
      fullInMs: Math.ceil((capacity - tokens) / refillPerMs),
      active,
    };
  }

  /**
   * The scopes whose buckets have state in Redis now, read from the scopes index (one script, the
   * cost of the scopes listed): the `limit` that lapse last (the most recently used, for buckets of
   * one family), sorted by name.
   */
  async listActiveScopes(limit = 1_000): Promise<string[]> {
    const scopes = await withTimeout(
      runLua<string[]>(this.client(), LIVE_SCOPES, [scopesIndexKey()], [limit]),
      this.redisTimeoutMs,
    );
    return scopes.sort();
  }
}

/** A limiter on its own Redis connection and time scale (tests, benchmarks); the module functions use a shared one. */
export function createLimiter(options: LimiterOptions = {}): Limiter {
  const limiter = new TokenBucketLimiter(options);
  return {
    /** Takes tokens if the bucket has them, or says how long until it will (`TokenBucketLimiter.tryAcquire`). */
    tryAcquire: (scope, cost) => limiter.tryAcquire(scope, cost),
    /** `tryAcquire` plus the waiting policy (`TokenBucketLimiter.acquire`). */
    acquire: (scope, acquireOptions) => limiter.acquire(scope, acquireOptions),
    /** A bucket's state now, read-only (`TokenBucketLimiter.peekBucket`). */
    peekBucket: (scope) => limiter.peekBucket(scope),
    /** The scopes with state in Redis now (`TokenBucketLimiter.listActiveScopes`). */
    listActiveScopes: (limit) => limiter.listActiveScopes(limit),
    /** A family's rate, margin included (`TokenBucketLimiter.rate`). */
    rate: (family) => limiter.rate(family),
  };
}

/**
 * The waiting policy for a wait of `waitMs` real milliseconds on `scope`, after `waitedMs`
 * already waited by the same caller: inside a deferral context, throws `RateLimitDefer(waitMs)`
 * when the total would pass the context's threshold; outside, throws `RateLimitCapExceeded`
 * when it would pass `maxWaitMs`; otherwise sleeps `waitMs` (abortable) and returns the real
 * milliseconds slept. Used by `acquire`, and by clients that were told to wait by the service.
 */
export async function waitForRateLimit(
  scope: string,
  waitMs: number,
  options: { waitedMs?: number; signal?: AbortSignal; maxWaitMs?: number } = {},
): Promise<number> {
  const waitedMs = options.waitedMs ?? 0;
  const threshold = deferralThreshold();
  if (threshold !== undefined) {
    if (waitedMs + waitMs > threshold) throw new RateLimitDefer(waitMs, scope);
  } else if (waitedMs + waitMs > (options.maxWaitMs ?? maxWaitMs())) {
    throw new RateLimitCapExceeded(waitMs, scope);
  }
  const started = performance.now();
  await sleep(waitMs, options.signal);
  return performance.now() - started;
}

let shared: Limiter | undefined;

/** The process's limiter: the shared Redis connection, the configured time scale. */
export function limiter(): Limiter {
  shared ??= createLimiter();
  return shared;
}

/**
 * Takes `cost` tokens from the scope's bucket if it has them; never waits. Otherwise answers how
 * long until it will, in real (time-scaled) milliseconds. Never rejects for Redis trouble: an
 * unreachable or slow Redis answers `{ acquired: false, waitMs: REDIS_ERROR_RETRY_MS scaled }`
 * (fail closed) and is logged once per outage. Rejects with a RangeError only for a call that
 * is a bug: a malformed scope, or a cost outside 1…capacity.
 */
export function tryAcquire(scope: string, cost = 1): Promise<TryAcquireResult> {
  return limiter().tryAcquire(scope, cost);
}

/**
 * `tryAcquire` plus the waiting policy. Inside `runWithRateLimitDeferral`, waits up to the
 * context's threshold in all (sleeping in between), and throws `RateLimitDefer(waitMs, scope)`
 * for a longer one — `waitMs` in real milliseconds, what the job should stay delayed. Outside a
 * deferral context, sleeps up to `maxWaitMs` in all, and throws `RateLimitCapExceeded` beyond.
 */
export function acquire(scope: string, options?: AcquireOptions): Promise<Acquired> {
  return limiter().acquire(scope, options);
}

/**
 * A bucket's state now, read-only (HMGET + Redis TIME; the refill is computed here, nothing is
 * written). Rejects when Redis cannot be asked.
 */
export function peekBucket(scope: string): Promise<BucketState> {
  return limiter().peekBucket(scope);
}
