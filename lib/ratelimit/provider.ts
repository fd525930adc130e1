import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { env } from "@/lib/env";
import { describeError } from "@/lib/format/describe";
import { logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { key, redis, type RedisClient } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import {
  limitedProviders,
  providerBucketSpec,
  providerLimits,
  providerScope,
  toProductionMs,
  type LimitedProvider,
  type ProviderLimits,
} from "./buckets";
import { currentDeadline, currentTenant } from "./context";
import { breakers, type Breaker, type GuardOptions } from "./breaker";
import { isRateLimitCapExceeded, isRateLimitDefer, NoSpareSlot } from "./errors";
import { createLimiter, maxWaitMs, REDIS_ERROR_RETRY_MS, waitForRateLimit, type Limiter } from "./limiter";
import { runLua } from "@/lib/redis/lua";
import { luaScript, withTimeout } from "./scripts";
import { pauseOf429, readAnnouncedLimits, type HeaderLookup } from "./provider-headers";
import {
  createProviderTokens,
  tokenUrgentKeys,
  type ProviderTokens,
  type ProviderTokensState,
  type TokenRequest,
  type TokenWaiter,
  type TokenReservation,
} from "./provider-tokens";

const log = logger("ratelimit.provider");

/**
 * How long a provider slot stays held without a renewal (production ms). A crashed worker's slot
 * comes back after this; a live call renews its lease every third of it, so a call of any length
 * (the slowest model calls take ~11 min) keeps its slot. A minute: a crash costs the provider one
 * slot for a minute, while three missed renewals in a row (a Redis blip) are needed to lose it.
 */
export const PROVIDER_LEASE_MS = 60_000;
/**
 * The shortest lease in real milliseconds, whatever the time scale: a lease renewed every third
 * of 60 ms (time scale 0.001) would be lost to one garbage-collection pause or a busy event loop,
 * and the slot would be handed out twice.
 */
export const PROVIDER_LEASE_FLOOR_MS = 3_000;
/**
 * How often a caller asks again for a slot while all of them are taken (production ms, jittered
 * ±50 %). The semaphore cannot say when a holder will finish (only when its lease would run out),
 * so a waiter polls; 200 ms is a few percent of a median model call, and a few Redis calls a
 * second per waiting call.
 */
export const SLOT_POLL_MS = 200;
/** The shortest poll in real milliseconds: at a tiny time scale, polling faster only loads Redis. */
const SLOT_POLL_FLOOR_MS = 5;
/**
 * How many poll intervals a refused tenant counts as waiting without asking again. Three: a
 * jittered poll comes at most 1.5 intervals after the last, so a tenant with a call still waiting
 * never drops out between two asks, and one whose calls stopped asking (served, deferred, aborted)
 * stops holding the others back after a fraction of a second.
 */
const SLOT_WAITER_POLLS = 3;
/**
 * The shortest waiter TTL in real milliseconds: at a tiny time scale three polls are a few ms,
 * shorter than one busy event-loop turn of the waiting process, and the tenant would lose its
 * place between two asks.
 */
export const SLOT_WAITER_TTL_FLOOR_MS = 100;
/**
 * The tenant of a call made outside any tenant's work (no `tenant` option, no `runAsTenant`):
 * all such calls share one fair share. Neither a UUID nor a slug can be spelled this way.
 */
export const ANONYMOUS_TENANT = "~anonymous";

/**
 * A call whose job has less than this left before its soft deadline (production ms) is urgent: it
 * takes the provider's next free slot before any call with more time left, whatever its tenant's
 * share (provider-slots.lua). Two minutes: an interactive run (60 s) is urgent all along, an import
 * (10 min) in its last two; a burst of imports resuming after an outage cannot make it miss.
 */
export const URGENT_WITHIN_MS = 120_000;

/** The Redis key of a provider's holders (the first key of provider-slots.lua). */
export function providerSlotsKey(provider: LimitedProvider): string {
  return key("ratelimit", "slots", `{${providerScope(provider)}}`);
}

/** The Redis key of a provider's waiting tenants (the second key of provider-slots.lua; same hash tag, same cluster slot). */
export function providerWaitersKey(provider: LimitedProvider): string {
  return key("ratelimit", "slot-waiters", `{${providerScope(provider)}}`);
}

/** The Redis keys of a provider's urgent waiters, by deadline and by expiry (the third and fourth keys of provider-slots.lua). */
export function providerUrgentKeys(provider: LimitedProvider): [byDeadline: string, byExpiry: string] {
  const tag = `{${providerScope(provider)}}`;
  return [key("ratelimit", "slot-urgent", tag), key("ratelimit", "slot-urgent-seen", tag)];
}

/** The Redis hash of a provider's wait counters (every process adds to it; the limiter page reads it). */
export function providerWaitsKey(provider: LimitedProvider): string {
  return key("ratelimit", "provider-waits", provider);
}

export interface ProviderSlotOptions {
  /** Aborts a wait for the slot; the promise then rejects with `signal.reason`, unchanged. */
  signal?: AbortSignal;
  /**
   * Outside a deferral context: the longest the caller waits in all, in real milliseconds.
   * @defaultValue `maxWaitMs()` (125 s production, time-scaled)
   */
  maxWaitMs?: number;
  /**
   * The tenant the call is made for: free slots are shared fairly between the tenants that wait
   * for them (provider-slots.lua). A tenant id or slug, never containing `|`.
   * @defaultValue `currentTenant()` (the job's tenant inside a worker run), else `ANONYMOUS_TENANT`
   */
  tenant?: string;
  /**
   * When the call's job must end (real ms since the epoch): within `URGENT_WITHIN_MS` of it, the
   * call goes before those with more time left.
   * @defaultValue `currentDeadline()` (the job's soft deadline inside a worker run), else none
   */
  deadlineAt?: number;
  /**
   * The call's tokens (prompt counted, max tokens if any): reserved from the provider's tokens per
   * minute before `fn` runs, settled by `ProviderCall.observe` after (./provider-tokens.ts).
   * @defaultValue none: the call takes no tokens (an OCR call)
   */
  tokens?: TokenRequest;
  /**
   * Only a slot that would otherwise sit idle: one is free, no call of any tenant waits for one,
   * and the request rate and the tokens allow the call at once. Otherwise `fn` does not run and
   * `withSlot` rejects with `NoSpareSlot`, at once, leaving no trace in the fair share: for a
   * call that is worth making only when it takes nothing from anyone (a hedged attempt).
   */
  spare?: boolean;
}

/** What a call running in a slot tells the limiter about the provider's answer. */
export interface ProviderAnswer {
  /** The HTTP status, when an answer came. */
  status?: number;
  /** The answer's headers: its rate-limit headers keep the limits current, a 429's wait pauses the provider. */
  header?: HeaderLookup;
  /** Tokens the answer used (`usage`), when it said. */
  usage?: { input: number; output: number };
}

/** Handed to the function run in a slot. */
export interface ProviderCall {
  /**
   * Settles the call's token reservation with the answer's usage (what is not known is given back,
   * the prompt kept), learns the limits its headers announce, and pauses the provider for every
   * process when it is a 429 that names a wait. Once per call; never throws.
   */
  observe(answer: ProviderAnswer): Promise<void>;
}

export interface ProviderLimiterOptions {
  /** @defaultValue the process's shared connection, `redis()` */
  redis?: RedisClient;
  /** @defaultValue `env().BOUNDED_TIME_SCALE` */
  timeScale?: number;
  /** Limits per provider. @defaultValue `providerLimits(provider)` (the environment) */
  limits?: Partial<Record<LimitedProvider, ProviderLimits>>;
  /** Real milliseconds a slot stays held without a renewal. @defaultValue `PROVIDER_LEASE_MS` scaled, at least `PROVIDER_LEASE_FLOOR_MS` */
  leaseMs?: number;
  /** Real milliseconds between two asks for a slot while all are taken (jittered ±50 %). @defaultValue `SLOT_POLL_MS` scaled, at least 5 */
  pollMs?: number;
  /** Real milliseconds a refused tenant counts as waiting without asking again. @defaultValue three `pollMs`, at least `SLOT_WAITER_TTL_FLOOR_MS` */
  waiterTtlMs?: number;
  /** Real milliseconds after which an unanswered Redis call counts as an error. @defaultValue 2000 */
  redisTimeoutMs?: number;
  /** The providers' circuit breakers. @defaultValue `breakers()` (shared, the environment's time scale) */
  breaker?: Breaker;
  /** The providers' tokens per minute. @defaultValue the configured or learnt limits, on `redis` */
  tokens?: ProviderTokens;
}

/** What the limiter page shows of one provider, in production units. */
export interface ProviderState {
  provider: LimitedProvider;
  /** Calls holding a slot now (leases not yet expired). */
  inFlight: number;
  /** Of those, per tenant (id or slug, `ANONYMOUS_TENANT` for calls made for no tenant). */
  inFlightByTenant: Record<string, number>;
  concurrency: number;
  /** Tokens of the request rate now, fractional. */
  tokens: number;
  /** Tokens a full bucket holds (the burst). */
  capacity: number;
  /** Requests per production second. */
  rps: number;
  /** Calls that waited for their slot since the counters began (every process). */
  waits: number;
  /** Production seconds those calls waited in all. */
  waitSeconds: number;
  /** Of those, calls that gave their worker slot back (deferred) or gave up at the cap. */
  gaveUp: number;
  /** Tokens per minute: the limits in force, where they came from, what is left; a pause a 429 asked for. */
  tokenLimits: ProviderTokensState;
  /** Who waits now: tenants refused a free slot for the fair share, and urgent calls (for a slot or tokens). */
  waiting: ProviderWaiting;
}

/** Calls waiting for a provider's slots or tokens now, as provider-slots.lua and provider-tokens.lua record them. */
export interface ProviderWaiting {
  /** Tenants recorded as waiting (refused for their share, or all slots held) and still asking. */
  tenants: number;
  /** Calls within `URGENT_WITHIN_MS` of their job's deadline waiting for a slot or for tokens: they go first, earliest deadline first. */
  urgent: number;
  /** The earliest deadline among them (epoch ms, real time), or null when none waits. */
  nearestDeadlineAt: number | null;
}

export interface ProviderLimiter {
  /**
   * Takes a slot of `provider` — a token of its request rate and one of its C in-flight slots,
   * both shared by every process — runs `fn`, and always gives the slot back. The slot's lease is
   * renewed while `fn` runs. Waiting follows the reschedule rule of `acquire`: a short wait is
   * slept (abortable by `signal`); inside a deferral context a longer one throws
   * `RateLimitDefer`, outside one the caller waits up to `maxWaitMs` in all, then gets
   * `RateLimitCapExceeded`. `fn` has not started when any of these is thrown.
   *
   * Free slots are shared fairly between the tenants waiting for them (provider-slots.lua): a
   * tenant holding its share (C ÷ tenants holding or waiting) waits while another tenant waits,
   * and takes any free slot nobody else wants.
   *
   * The provider's circuit breaker (./breaker.ts) comes first: while it is open no slot is taken
   * and `OutsideServiceDown` is thrown; what `fn` says about the provider (its error, or
   * `failureOf` its result) feeds the breaker, and a failure that finds the provider down ends
   * with `OutsideServiceDown` instead.
   */
  withSlot<T>(
    provider: LimitedProvider,
    fn: (call: ProviderCall) => Promise<T>,
    options?: ProviderSlotOptions & Pick<GuardOptions<T>, "failureOf">,
  ): Promise<T>;
  /** One provider's state now and its wait counters. Rejects when Redis cannot be asked. */
  peek(provider: LimitedProvider): Promise<ProviderState>;
  /** The limits in force for `provider`. */
  limits(provider: LimitedProvider): ProviderLimits;
}

type SlotReply = [ok: number, inFlight: number, waitMs: number];

/** One provider limiter's settings, request-rate bucket, token budgets and Redis health: the state `createProviderLimiter` hands each of its functions. */
interface ProviderLimiterInstance {
  /** The options it was made with: `breaker` is read at each call (the shared one when absent). */
  options: ProviderLimiterOptions;
  /** The Redis connection, asked for at each use: `options.redis`, else the shared one. */
  client: () => RedisClient;
  timeScale: number;
  leaseMs: number;
  pollMs: number;
  waiterTtlMs: number;
  redisTimeoutMs: number;
  errorRetryMs: number;
  /** The limits in force for a provider: `options.limits`, else the environment's. */
  limitsOf: (provider: LimitedProvider) => ProviderLimits;
  /** The request-rate token bucket (./limiter.ts). */
  tokens: Limiter;
  /** The tokens per minute (./provider-tokens.ts). */
  tokenBudgets: ProviderTokens;
  /** Redis could not be reached last time: its error is logged once per outage. */
  failing: boolean;
}

/** A provider limiter on its own Redis connection, time scale and limits (tests); `withProviderSlot` uses a shared one. */
export function createProviderLimiter(options: ProviderLimiterOptions = {}): ProviderLimiter {
  const client = () => options.redis ?? redis();
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const leaseMs = options.leaseMs ?? Math.max(PROVIDER_LEASE_FLOOR_MS, scaled(PROVIDER_LEASE_MS, timeScale));
  const pollMs = options.pollMs ?? Math.max(SLOT_POLL_FLOOR_MS, scaled(SLOT_POLL_MS, timeScale));
  const waiterTtlMs = options.waiterTtlMs ?? Math.max(SLOT_WAITER_TTL_FLOOR_MS, SLOT_WAITER_POLLS * pollMs);
  const redisTimeoutMs = options.redisTimeoutMs ?? 2_000;
  const errorRetryMs = Math.max(1, scaled(REDIS_ERROR_RETRY_MS, timeScale));
  const limitsOf = (provider: LimitedProvider) => options.limits?.[provider] ?? providerLimits(provider);
  // The token bucket is the limiter's: one script, one call site (`tryAcquire`).
  const tokens: Limiter = createLimiter({
    redis: options.redis,
    timeScale,
    redisTimeoutMs,
    providerLimits: options.limits,
  });
  const tokenBudgets: ProviderTokens =
    options.tokens ?? createProviderTokens({ redis: options.redis, timeScale, redisTimeoutMs });
  const self: ProviderLimiterInstance = {
    options,
    client,
    timeScale,
    leaseMs,
    pollMs,
    waiterTtlMs,
    redisTimeoutMs,
    errorRetryMs,
    limitsOf,
    tokens,
    tokenBudgets,
    failing: false,
  };

  return {
    withSlot: (provider, fn, slotOptions) => withSlot(self, provider, fn, slotOptions),
    peek: (provider) => peek(self, provider),
    limits: limitsOf,
  };
}

/** The only call site of provider-slots.lua. Fails closed: without Redis, no slot. */
async function slotScript(
  self: ProviderLimiterInstance,
  provider: LimitedProvider,
  mode: "acquire" | "spare" | "renew",
  holder: string,
  urgentDeadline?: number,
): Promise<SlotReply> {
  try {
    const reply = await withTimeout(
      runLua<SlotReply>(
        self.client(),
        luaScript("provider-slots.lua"),
        [providerSlotsKey(provider), providerWaitersKey(provider), ...providerUrgentKeys(provider)],
        [
          mode,
          holder,
          self.limitsOf(provider).concurrency,
          self.leaseMs,
          self.waiterTtlMs,
          urgentDeadline === undefined ? "" : Math.round(urgentDeadline),
        ],
      ),
      self.redisTimeoutMs,
    );
    if (self.failing) log.info({ provider }, "provider limiter reached Redis again");
    self.failing = false;
    return reply.map(Number) as SlotReply;
  } catch (err) {
    // Once per outage, not once per call: every waiting call asks again shortly.
    if (!self.failing)
      log.error(
        { provider, error: describeError(err), retryInMs: self.errorRetryMs },
        "provider limiter cannot reach Redis; no provider slots until it can",
      );
    self.failing = true;
    return [0, 0, self.errorRetryMs];
  }
}

/** Gives a slot back; never throws (its lease runs out by itself). */
async function release(self: ProviderLimiterInstance, provider: LimitedProvider, holder: string): Promise<void> {
  try {
    await withTimeout(self.client().zrem(providerSlotsKey(provider), holder), self.redisTimeoutMs);
  } catch (err) {
    // The lease runs out by itself: the slot comes back within `leaseMs`.
    log.warn(
      { provider, error: describeError(err), leaseMs: self.leaseMs },
      "could not release a provider slot; it comes back when its lease expires",
    );
  }
}

/** Renews the lease every third of it while the call runs; a lost lease is logged, never thrown at the call. */
function keepLease(self: ProviderLimiterInstance, provider: LimitedProvider, holder: string): () => void {
  let lost = false;
  const timer = setInterval(
    () => {
      void slotScript(self, provider, "renew", holder).then(([ok]) => {
        if (ok === 1 || lost || self.failing) return;
        lost = true;
        log.warn(
          { provider, leaseMs: self.leaseMs },
          "a provider call outlived its lease (renewals did not reach Redis); its slot may be handed out again",
        );
      });
    },
    Math.max(1, Math.floor(self.leaseMs / 3)),
  );
  timer.unref();
  return () => clearInterval(timer);
}

/** Counts a wait in Redis (for the page, across processes) and in this process's metrics. Never throws. */
function countWait(self: ProviderLimiterInstance, provider: LimitedProvider, waitedMs: number, gaveUp: boolean): void {
  if (waitedMs <= 0 && !gaveUp) return;
  const productionMs = toProductionMs(waitedMs, self.timeScale);
  metrics.providerWaited({ provider }, productionMs / 1000);
  const k = providerWaitsKey(provider);
  const batch = self.client().multi().hincrby(k, "waits", 1).hincrby(k, "waitMs", productionMs);
  if (gaveUp) batch.hincrby(k, "gaveUp", 1);
  void withTimeout(batch.exec(), self.redisTimeoutMs).catch((err: unknown) =>
    log.debug({ provider, error: describeError(err) }, "could not count a provider wait"),
  );
}

/**
 * Waits for a slot, then for a token while holding it (a token taken while no slot is free
 * would be spent on no call, and the pollers would drain the bucket the real calls need).
 * Every wait, slot or token, goes through `waitForRateLimit` with the total waited so far: the
 * reschedule rule decides, once for the whole wait. A slot refused for the fair share (free, but
 * another tenant's turn) is waited for like a taken one: asked again after one poll.
 */
async function take(
  self: ProviderLimiterInstance,
  provider: LimitedProvider,
  holder: string,
  slotOptions: ProviderSlotOptions,
): Promise<TokenReservation | undefined> {
  const scope = providerScope(provider);
  const { signal, spare } = slotOptions;
  const cap = slotOptions.maxWaitMs ?? maxWaitMs(self.timeScale);
  const deadlineAt = slotOptions.deadlineAt ?? currentDeadline();
  // Urgent once within URGENT_WITHIN_MS of its deadline: asked at each poll, as a wait may cross it.
  const urgent = () =>
    deadlineAt !== undefined && deadlineAt - Date.now() < URGENT_WITHIN_MS * self.timeScale ? deadlineAt : undefined;
  /** One poll, jittered so that waiters do not ask in step. */
  const poll = () => Math.max(1, Math.round(self.pollMs * (0.5 + Math.random())));
  let waitedMs = 0;
  let holding = false;
  let reservation: TokenReservation | undefined;
  try {
    for (;;) {
      signal?.throwIfAborted();
      const [ok, , slotWaitMs] = await slotScript(self, provider, spare ? "spare" : "acquire", holder, urgent());
      holding = ok === 1;
      if (!holding) {
        if (spare) throw new NoSpareSlot(provider);
        waitedMs += await waitForRateLimit(scope, Math.min(poll(), slotWaitMs), { waitedMs, signal, maxWaitMs: cap });
        continue;
      }
      // Tokens per minute before the request's token: a request token taken for a call that then
      // waits for its tokens would be spent on no call.
      if (slotOptions.tokens && !reservation) {
        const reserved = await reserveTokens(self, provider, slotOptions.tokens, {
          id: holder,
          urgentDeadlineAt: urgent(),
          ttlMs: self.waiterTtlMs,
        });
        if (!reserved.ok) {
          if (spare) throw new NoSpareSlot(provider);
          // An urgent call asks again at each poll, as for a slot: it keeps its place ahead of
          // later deadlines only while it asks, and drops out soon after it stops.
          const wait = urgent() === undefined ? reserved.waitMs : Math.min(reserved.waitMs, poll());
          waitedMs += await waitForRateLimit(scope, wait, { waitedMs, signal, maxWaitMs: cap });
          continue;
        }
        reservation = reserved.reservation;
      }
      const token = await self.tokens.tryAcquire(scope);
      if (token.acquired) break;
      if (spare) throw new NoSpareSlot(provider);
      waitedMs += await waitForRateLimit(scope, token.waitMs, { waitedMs, signal, maxWaitMs: cap });
    }
  } catch (err) {
    if (holding) await release(self, provider, holder);
    // Nothing was sent: every token reserved goes back.
    if (reservation) await self.tokenBudgets.settle(provider, reservation, "nothing");
    countWait(self, provider, waitedMs, isRateLimitDefer(err) || isRateLimitCapExceeded(err));
    throw err;
  }
  countWait(self, provider, waitedMs, false);
  return reservation;
}

/** A reservation of the call's tokens, or how long to wait for one. Fails closed: without Redis, no tokens. */
async function reserveTokens(
  self: ProviderLimiterInstance,
  provider: LimitedProvider,
  request: TokenRequest,
  waiter: TokenWaiter,
) {
  try {
    return await self.tokenBudgets.reserve(provider, request, waiter);
  } catch (err) {
    if (!self.failing)
      log.error(
        { provider, error: describeError(err), retryInMs: self.errorRetryMs },
        "provider limiter cannot reach Redis; no provider tokens until it can",
      );
    self.failing = true;
    return { ok: false as const, waitMs: self.errorRetryMs, reason: "tokens" as const };
  }
}

/** The `ProviderCall` of one call: settles its reservation once, learns from its answer, and pauses the provider on a 429 that asks for it. */
function providerCall(
  self: ProviderLimiterInstance,
  provider: LimitedProvider,
  reservation: TokenReservation | undefined,
): ProviderCall & { settled: boolean } {
  const call = {
    settled: false,
    async observe(answer: ProviderAnswer): Promise<void> {
      if (call.settled) return;
      call.settled = true;
      // The answer's own usage first, then the provider's word on what remains (which already counts it).
      if (reservation)
        await self.tokenBudgets.settle(provider, reservation, answer.status === 429 ? "nothing" : answer.usage);
      const announced = answer.header ? readAnnouncedLimits(answer.header) : undefined;
      if (reservation || announced)
        await self.tokenBudgets.learn(provider, announced, answer.status !== undefined && answer.status < 400);
      if (answer.status === 429 && answer.header) {
        const pauseMs = pauseOf429(answer.header);
        if (pauseMs !== undefined && pauseMs > 0)
          await self.tokenBudgets.pause(
            provider,
            pauseMs,
            `the provider answered 429 and asked for ${Math.round(pauseMs)} ms`,
          );
      }
    },
  };
  return call;
}

/** `ProviderLimiter.withSlot` on `self`: the breaker first, then a slot held (its lease renewed) while `fn` runs. */
async function withSlot<T>(
  self: ProviderLimiterInstance,
  provider: LimitedProvider,
  fn: (call: ProviderCall) => Promise<T>,
  slotOptions: ProviderSlotOptions & Pick<GuardOptions<T>, "failureOf"> = {},
): Promise<T> {
  const holder = holderId(slotOptions.tenant ?? currentTenant() ?? ANONYMOUS_TENANT);
  return (self.options.breaker ?? breakers()).guard(
    provider,
    async () => {
      const reservation = await take(self, provider, holder, slotOptions);
      const stopRenewing = keepLease(self, provider, holder);
      const call = providerCall(self, provider, reservation);
      try {
        return await fn(call);
      } finally {
        stopRenewing();
        await release(self, provider, holder);
        // A call that ended without saying what came back: its prompt stays counted, the rest is given back.
        if (!call.settled) await call.observe({});
      }
    },
    { signal: slotOptions.signal, failureOf: slotOptions.failureOf },
  );
}

/** `ProviderLimiter.peek` on `self`: one provider's slots, request rate, wait counters and token limits now. */
async function peek(self: ProviderLimiterInstance, provider: LimitedProvider): Promise<ProviderState> {
  const limits = self.limitsOf(provider);
  const [time, bucket, waits, tokenLimits] = await Promise.all([
    withTimeout(self.client().time(), self.redisTimeoutMs),
    self.tokens.peekBucket(providerScope(provider)),
    withTimeout(self.client().hmget(providerWaitsKey(provider), "waits", "waitMs", "gaveUp"), self.redisTimeoutMs),
    self.tokenBudgets.peek(provider),
  ]);
  const now = Number(time[0]) * 1000 + Number(time[1]) / 1000;
  const [holders, waiting] = await Promise.all([
    withTimeout(self.client().zrangebyscore(providerSlotsKey(provider), now.toFixed(3), "+inf"), self.redisTimeoutMs),
    withTimeout(readWaiting(self.client(), provider, now), self.redisTimeoutMs),
  ]);
  const inFlightByTenant: Record<string, number> = {};
  for (const h of holders) {
    const tenant = tenantOfHolder(h);
    inFlightByTenant[tenant] = (inFlightByTenant[tenant] ?? 0) + 1;
  }
  return {
    provider,
    inFlight: holders.length,
    inFlightByTenant,
    concurrency: limits.concurrency,
    tokens: bucket.tokens,
    capacity: providerBucketSpec(provider, limits).capacity,
    rps: limits.rps,
    waits: Number(waits[0] ?? 0),
    waitSeconds: Number(waits[1] ?? 0) / 1000,
    gaveUp: Number(waits[2] ?? 0),
    tokenLimits,
    waiting,
  };
}

/** The live waiters of provider-slots.lua and provider-tokens.lua (expired ones are not counted). */
async function readWaiting(client: RedisClient, provider: LimitedProvider, now: number): Promise<ProviderWaiting> {
  const urgentOf = async ([byDeadline, seen]: [string, string]) => {
    const ids = await client.zrangebyscore(seen, now.toFixed(3), "+inf");
    const deadlines = ids.length === 0 ? [] : await client.zmscore(byDeadline, ...ids);
    return deadlines.filter((d): d is string => d !== null).map(Number);
  };
  const [tenants, forSlots, forTokens] = await Promise.all([
    client.zcount(providerWaitersKey(provider), now.toFixed(3), "+inf"),
    urgentOf(providerUrgentKeys(provider)),
    urgentOf(tokenUrgentKeys(provider)),
  ]);
  const urgent = [...forSlots, ...forTokens];
  return { tenants, urgent: urgent.length, nearestDeadlineAt: urgent.length ? Math.min(...urgent) : null };
}

/**
 * A slot holder's id: the tenant first (the script reads it up to the first `|` for the fair
 * share), then this process and a fresh UUID (one id per call).
 */
function holderId(tenant: string): string {
  if (tenant === "" || tenant.includes("|"))
    throw new RangeError(`a tenant is not empty and has no "|", got ${JSON.stringify(tenant)}`);
  return `${tenant}|${hostname()}:${process.pid}:${randomUUID()}`;
}

/** The tenant a holder id was taken for, as provider-slots.lua reads it. */
function tenantOfHolder(holder: string): string {
  const bar = holder.indexOf("|");
  return bar < 0 ? "" : holder.slice(0, bar);
}

let shared: ProviderLimiter | undefined;

/** The process's provider limiter: the shared Redis connection, the configured limits and time scale. */
export function providerLimiter(): ProviderLimiter {
  shared ??= createProviderLimiter();
  return shared;
}

/**
 * Runs one outbound call of `provider` inside a provider slot: at most C calls in flight and R
 * requests per production second across every worker process (`BOUNDED_PROVIDER_<PROVIDER>_*`).
 * One slot per HTTP attempt: a retry's backoff is spent outside it. See `ProviderLimiter.withSlot`.
 */
export function withProviderSlot<T>(
  provider: LimitedProvider,
  fn: (call: ProviderCall) => Promise<T>,
  options?: ProviderSlotOptions & Pick<GuardOptions<T>, "failureOf">,
): Promise<T> {
  return providerLimiter().withSlot(provider, fn, options);
}

/** How often `knownTokenLimit` reads the limit again (real ms): the limits move with the provider's answers, not faster. */
const KNOWN_LIMIT_REFRESH_MS = 5_000;
const knownLimits = new Map<LimitedProvider, { value: number | undefined; at: number; reading: boolean }>();
let knownLimitReader: ProviderTokens | undefined;

/**
 * The tokens per minute of `provider` as last read (configured, or learnt from its headers; the
 * whole budget, else its input budget), or undefined while none is known. Synchronous for callers
 * that size work as it arrives (the categoriser's batches): it answers from this process's copy
 * and reads Redis again in the background when that copy is older than a few seconds.
 */
export function knownTokenLimit(provider: LimitedProvider): number | undefined {
  let entry = knownLimits.get(provider);
  if (!entry) {
    entry = { value: undefined, at: -Infinity, reading: false };
    knownLimits.set(provider, entry);
  }
  if (!entry.reading && performance.now() - entry.at > KNOWN_LIMIT_REFRESH_MS) {
    const e = entry;
    e.reading = true;
    knownLimitReader ??= createProviderTokens();
    void knownLimitReader
      .peek(provider)
      .then(
        ({ budgets }) => {
          e.value = (budgets.find((b) => b.budget === "tokens") ?? budgets.find((b) => b.budget === "input"))?.limit;
          e.at = performance.now();
        },
        // Redis unreadable: the last value stands, and the next call asks again.
        () => undefined,
      )
      .finally(() => (e.reading = false));
  }
  return entry.value;
}

/** Every limited provider's state, for the limiter page; null when Redis cannot be read. */
export async function readProviderStates(
  limiter: ProviderLimiter = providerLimiter(),
): Promise<ProviderState[] | null> {
  try {
    return await Promise.all(limitedProviders().map((p) => limiter.peek(p)));
  } catch (err) {
    log.warn({ error: describeError(err) }, "could not read the provider limits for the limiter page");
    return null;
  }
}
