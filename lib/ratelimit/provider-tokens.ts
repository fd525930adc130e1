import { randomUUID } from "node:crypto";
import { env, type Env } from "@/lib/env";
import { describeError } from "@/lib/format/describe";
import { logger } from "@/lib/log";
import { key, redis, type RedisClient } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import { providerOfService } from "@/lib/model-providers";
import { providerScope, type LimitedProvider } from "./buckets";
import { TOKEN_BUDGETS, type AnnouncedLimits, type TokenBudget } from "./provider-headers";
import { runLua } from "@/lib/redis/lua";
import { luaScript, withTimeout } from "./scripts";

const log = logger("ratelimit.tokens");

/**
 * A provider's tokens per minute, shared by every worker process (provider-tokens.lua): each call
 * reserves its estimated tokens before it is sent — its prompt counted the way the provider counts
 * it, plus its completion estimated from the request's max tokens and the mean of the calls of the
 * same shape so far — and settles with the answer's `usage` after. The limit is configured
 * (`BOUNDED_MODEL_TPM`, `_INPUT_TPM`, `_OUTPUT_TPM`) or learnt from the answers' headers and kept
 * current by every answer (limit, remaining, reset); until the provider has said anything, a few
 * calls at a time ask it (`MAX_PROBES`). A 429 that names a wait pauses the provider for every process until then.
 */

/**
 * Production ms a call that is first to ask a provider with no known limit holds the probe: the
 * slowest ordinary answer (a p99 batch call ≈ 60 s) and then some; a crashed prober's probe comes
 * back after it.
 */
const PROBE_LEASE_MS = 120_000;
/** The shortest probe lease in real ms, whatever the time scale (as `PROVIDER_LEASE_FLOOR_MS` for slots). */
const PROBE_LEASE_FLOOR_MS = 3_000;
/** Production ms between two asks while other calls probe: a fraction of a median call. */
const PROBE_POLL_MS = 1_000;
/**
 * Calls that may ask a provider at once while none of its limits is known. A few, not one: until
 * the first answer (a median call, ~5.5 s) the provider's budget refills unused, and four ordinary
 * calls (≈ 3,000 tokens) fit the smallest token tiers; a stricter provider answers 429 and says
 * its limit, which then holds for everyone.
 */
export const MAX_PROBES = 4;
/** The completion estimate of a call of a shape never seen, when the request gives no max tokens. */
export const DEFAULT_COMPLETION_ESTIMATE = 256;

/** What a call expects to spend: its prompt (counted) and the most its answer may take. */
export interface TokenRequest {
  /** Prompt tokens, counted the way the provider counts them (lib/modelcalls/tokens.ts). */
  input: number;
  /** The request's max tokens, when it sets one. */
  maxOutput?: number;
  /** Calls of one shape have similar answers (e.g. `categorise:8`): their mean estimates the next. @defaultValue "call" */
  shape?: string;
}

/** Tokens taken from the budgets for one call, to be settled after it. */
export interface TokenReservation {
  input: number;
  output: number;
  shape: string;
  /** This call is the one asking a provider with no known limit. */
  probe: boolean;
}

export type ReserveResult =
  | { ok: true; reservation: TokenReservation }
  | { ok: false; waitMs: number; reason: "paused" | "tokens" | "probing" | "urgent" };

/** Who asks for tokens: its id (one per call), and its job's deadline when the call is urgent. */
export interface TokenWaiter {
  id: string;
  /** Epoch ms, real time; set only for a call within `URGENT_WITHIN_MS` of it (lib/ratelimit/provider.ts). */
  urgentDeadlineAt?: number;
  /** How long a refused urgent call counts as waiting without asking again (real ms). */
  ttlMs: number;
}

/** One budget as the limiter page shows it, production units. */
export interface TokenBudgetState {
  budget: TokenBudget;
  /** Tokens per minute in force. */
  limit: number;
  source: "configured" | "headers";
  /** Tokens in the shared bucket now (after reservations of calls still answering). */
  available: number;
  /** The provider's last word: its limit, what remained, when it is whole again and when it said so. */
  announced: { limit: number; remaining: number; resetAt: string; at: string } | null;
}

export interface ProviderTokensState {
  budgets: TokenBudgetState[];
  /** A 429 asked every process to stay away until then (ISO), or null. */
  pausedUntil: string | null;
  pauseReason: string | null;
  /** No limit configured, and the answers announced none. */
  unannounced: boolean;
}

export interface ProviderTokens {
  /** Reserves a call's estimated tokens; an urgent `waiter` goes before later deadlines (provider-tokens.lua). */
  reserve(provider: LimitedProvider, request: TokenRequest, waiter?: TokenWaiter): Promise<ReserveResult>;
  /**
   * Settles a reservation with what the answer used (undefined: not known, the output is given
   * back; "nothing": never sent or refused with a 429, everything is given back and the answer
   * history that estimates completions is left alone). Never throws.
   */
  settle(
    provider: LimitedProvider,
    reservation: TokenReservation,
    used: { input: number; output: number } | "nothing" | undefined,
  ): Promise<void>;
  /** Keeps the limits current from an answer's headers (undefined: it announced none). Never throws. */
  learn(provider: LimitedProvider, announced: AnnouncedLimits | undefined, answered: boolean): Promise<void>;
  /** Pauses the provider for every process for `ms` real ms. Never throws. */
  pause(provider: LimitedProvider, ms: number, reason: string): Promise<void>;
  peek(provider: LimitedProvider): Promise<ProviderTokensState>;
}

export interface ProviderTokensOptions {
  redis?: RedisClient;
  /** @defaultValue `env().BOUNDED_TIME_SCALE` */
  timeScale?: number;
  /** Configured tokens per minute per provider; a budget left out is learnt. @defaultValue `configuredTokenLimits(provider)` */
  limits?: Partial<Record<LimitedProvider, Partial<Record<TokenBudget, number>>>>;
  /** @defaultValue 2000 */
  redisTimeoutMs?: number;
}

/** The Redis hash of a provider's token budgets (the first key of provider-tokens.lua; the provider's hash tag). */
export function providerTokensKey(provider: LimitedProvider): string {
  return key("ratelimit", "provider-tokens", `{${providerScope(provider)}}`);
}

/** The urgent calls waiting for tokens, by deadline and by expiry (the second and third keys of provider-tokens.lua). */
export function tokenUrgentKeys(provider: LimitedProvider): [byDeadline: string, byExpiry: string] {
  const tag = `{${providerScope(provider)}}`;
  return [key("ratelimit", "token-urgent", tag), key("ratelimit", "token-urgent-seen", tag)];
}

/**
 * A provider's configured token limits: the primary model provider's `BOUNDED_MODEL_TPM`,
 * `_INPUT_TPM`, `_OUTPUT_TPM`; another model provider's `BOUNDED_MODEL_<NAME>_TPM`; none for OCR.
 */
export function configuredTokenLimits(provider: LimitedProvider, e: Env = env()): Partial<Record<TokenBudget, number>> {
  if (provider === "model")
    return { tokens: e.BOUNDED_MODEL_TPM, input: e.BOUNDED_MODEL_INPUT_TPM, output: e.BOUNDED_MODEL_OUTPUT_TPM };
  if (provider === "ocr") return {};
  return { tokens: providerOfService(provider)?.tpm };
}

/** What `createProviderTokens` hands out: its settings over provider-tokens.lua, one Redis hash per provider. */
class RedisProviderTokens {
  private readonly timeScale: number;
  private readonly redisTimeoutMs: number;
  /** A minute in real ms: the window of every token budget. */
  private readonly minuteMs: number;

  /** Reads the options' defaults once: the time scale, the Redis timeout and the minute they give. */
  constructor(private readonly options: ProviderTokensOptions) {
    this.timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
    this.redisTimeoutMs = options.redisTimeoutMs ?? 2_000;
    this.minuteMs = Math.max(1, scaled(60_000, this.timeScale));
  }

  /** The Redis connection, asked for at each call: the options' own, or the process's shared one. */
  private client(): RedisClient {
    return this.options.redis ?? redis();
  }

  /** A provider's configured tokens per minute, one per budget in `TOKEN_BUDGETS` order (0: learnt). */
  private configured(provider: LimitedProvider): number[] {
    const limits = this.options.limits?.[provider] ?? configuredTokenLimits(provider);
    return TOKEN_BUDGETS.map((b) => limits[b] ?? 0);
  }

  /** The only call site of provider-tokens.lua: one mode of it for a provider, within the Redis timeout. */
  private run<T>(provider: LimitedProvider, mode: string, args: (string | number)[]): Promise<T> {
    return withTimeout(
      runLua<T>(
        this.client(),
        luaScript("provider-tokens.lua"),
        [providerTokensKey(provider), ...tokenUrgentKeys(provider)],
        [mode, this.minuteMs, ...this.configured(provider), ...args],
      ),
      this.redisTimeoutMs,
    );
  }

  /** Reserves a call's estimated tokens, or says how long to wait and why. Rejects when Redis cannot be asked. */
  async reserve(provider: LimitedProvider, request: TokenRequest, waiter?: TokenWaiter): Promise<ReserveResult> {
    const shape = request.shape ?? "call";
    const input = Math.max(0, Math.ceil(request.input));
    const [ok, waitMs, reason, output] = await this.run<[number, number, string, number]>(provider, "reserve", [
      input,
      request.maxOutput ?? 0,
      DEFAULT_COMPLETION_ESTIMATE,
      shape,
      // Never shorter than a slot's lease floor: at a tiny time scale a probe still answering would
      // lose its lease to a busy event loop, and more calls would ask than MAX_PROBES.
      Math.max(PROBE_LEASE_FLOOR_MS, scaled(PROBE_LEASE_MS, this.timeScale)),
      Math.max(1, scaled(PROBE_POLL_MS, this.timeScale)),
      MAX_PROBES,
      waiter?.id ?? randomUUID(),
      waiter?.urgentDeadlineAt === undefined ? "" : Math.round(waiter.urgentDeadlineAt),
      waiter?.ttlMs ?? 1,
    ]);
    if (Number(ok) === 1)
      return { ok: true, reservation: { input, output: Number(output), shape, probe: reason === "probe" } };
    return {
      ok: false,
      waitMs: Math.max(1, Number(waitMs)),
      reason: reason as "paused" | "tokens" | "probing" | "urgent",
    };
  }

  /** Settles a reservation with what the answer used (`ProviderTokens.settle`). Never throws. */
  async settle(
    provider: LimitedProvider,
    r: TokenReservation,
    used: { input: number; output: number } | "nothing" | undefined,
  ): Promise<void> {
    const [input, output] = used === "nothing" ? [0, -2] : [used?.input ?? -1, used?.output ?? -1];
    try {
      await this.run(provider, "settle", [r.input, r.output, input, output, r.shape, r.probe ? 1 : 0]);
    } catch (err) {
      // The reservation stays taken; the bucket refills from it within a minute.
      log.warn({ provider, error: describeError(err) }, "could not settle a token reservation");
    }
  }

  /** Keeps the limits current from an answer's headers (undefined: it announced none). Never throws. */
  async learn(provider: LimitedProvider, announced: AnnouncedLimits | undefined, answered: boolean): Promise<void> {
    const args: (string | number)[] = [announced && Object.keys(announced.tokens).length > 0 ? 1 : 0];
    for (const b of TOKEN_BUDGETS) {
      const a = announced?.tokens[b];
      args.push(a?.limit ?? 0, a?.remaining ?? 0, a ? Math.round(a.resetMs) : -1);
    }
    args.push(answered ? 1 : 0);
    try {
      await this.run(provider, "learn", args);
    } catch (err) {
      log.warn({ provider, error: describeError(err) }, "could not keep the provider's token limits current");
    }
  }

  /** Pauses the provider for every process for `ms` real ms. Never throws. */
  async pause(provider: LimitedProvider, ms: number, reason: string): Promise<void> {
    try {
      await this.run(provider, "pause", [Math.max(0, Math.round(ms)), reason]);
      log.warn({ provider, pauseMs: ms, reason }, "the provider asked every caller to wait: paused for every process");
    } catch (err) {
      log.warn({ provider, error: describeError(err) }, "could not pause the provider for every process");
    }
  }

  /** A provider's budgets and pause now (HGETALL + Redis TIME, refill computed here); rejects without Redis. */
  async peek(provider: LimitedProvider): Promise<ProviderTokensState> {
    const [hash, time] = await withTimeout(
      Promise.all([this.client().hgetall(providerTokensKey(provider)), this.client().time()]),
      this.redisTimeoutMs,
    );
    const now = Number(time[0]) * 1000 + Number(time[1]) / 1000;
    const limits = this.configured(provider);
    const num = (field: string) => (hash[field] === undefined ? undefined : Number(hash[field]));
    const budgets: TokenBudgetState[] = [];
    TOKEN_BUDGETS.forEach((b, i) => {
      const limit = limits[i]! > 0 ? limits[i]! : num(`${b}:limit`);
      if (limit === undefined) return;
      const level = num(`${b}:level`);
      const ts = num(`${b}:ts`);
      const available =
        level === undefined || ts === undefined
          ? limit
          : Math.min(limit, level + (Math.max(0, now - ts) * limit) / this.minuteMs);
      const announcedAt = num(`${b}:learntAt`);
      budgets.push({
        budget: b,
        limit,
        source: limits[i]! > 0 ? "configured" : "headers",
        available,
        announced:
          announcedAt === undefined
            ? null
            : {
                limit: num(`${b}:announced`) ?? limit,
                remaining: num(`${b}:remaining`) ?? 0,
                // The reset as the provider's clock runs: a time-scaled wait is shown as it was said.
                // Never before the announcement: the answer's own time and the moment it was
                // recorded differ by however long a loaded process took in between.
                resetAt: new Date(Date.now() + (Math.max(num(`${b}:resetAt`) ?? now, announcedAt) - now)).toISOString(),
                at: new Date(Date.now() - (now - announcedAt)).toISOString(),
              },
      });
    });
    const paused = num("pausedUntil");
    return {
      budgets,
      pausedUntil: paused !== undefined && paused > now ? new Date(Date.now() + (paused - now)).toISOString() : null,
      pauseReason: paused !== undefined && paused > now ? (hash.pauseReason ?? null) : null,
      unannounced: budgets.length === 0 && hash.announced === "none",
    };
  }
}

/** Token budgets on their own Redis connection, time scale and limits (tests); the provider limiter makes its own. */
export function createProviderTokens(options: ProviderTokensOptions = {}): ProviderTokens {
  const tokens = new RedisProviderTokens(options);
  return {
    /** Reserves a call's estimated tokens (`RedisProviderTokens.reserve`). */
    reserve: (provider, request, waiter) => tokens.reserve(provider, request, waiter),
    /** Settles a reservation with what the answer used (`RedisProviderTokens.settle`). */
    settle: (provider, reservation, used) => tokens.settle(provider, reservation, used),
    /** Keeps the limits current from an answer's headers (`RedisProviderTokens.learn`). */
    learn: (provider, announced, answered) => tokens.learn(provider, announced, answered),
    /** Pauses the provider for every process (`RedisProviderTokens.pause`). */
    pause: (provider, ms, reason) => tokens.pause(provider, ms, reason),
    /** A provider's budgets and pause now (`RedisProviderTokens.peek`). */
    peek: (provider) => tokens.peek(provider),
  };
}
