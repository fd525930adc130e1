import { env } from "@/lib/env";
import { snippet } from "@/lib/format/describe";
import { attemptRequest, backoffMs as retryBackoffMs, describeFailure } from "@/lib/http/outbound";
import { logger } from "@/lib/log";
import { guardCall } from "@/lib/ratelimit/breaker";
import { bucketRate, BUCKETS, scopeOf, type Family } from "@/lib/ratelimit/buckets";
import {
  acquire as sharedAcquire,
  maxWaitMs as defaultMaxWaitMs,
  waitForRateLimit,
  type Limiter,
} from "@/lib/ratelimit/limiter";
import { scaled, sleep } from "@/lib/time";
import { marketplacePageSchema, storableRecords, type MarketplaceItem } from "./schemas";

const log = logger("marketplace.client");

export type MarketplaceErrorCode =
  | "unreachable"
  | "server_error"
  | "throttled"
  | "not_found"
  | "rejected"
  | "invalid_response";

/**
 * A marketplace page could not be read: the service kept failing, refused the request, or
 * answered something that is not a page. Never a control signal: a rate-limit deferral and an
 * aborted signal reach the caller as they are, never wrapped in this.
 */
export class MarketplaceError extends Error {
  override name = "MarketplaceError";
  constructor(
    message: string,
    readonly details: {
      code: MarketplaceErrorCode;
      status?: number;
      attempts: number;
      retryable: boolean;
      cause?: unknown;
    },
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
  }
}

export interface FetchMarketplacePageOptions {
  family: Family;
  /** The tenant's slug (the marketplace seller it syncs). */
  tenant: string;
  /** From 1. */
  page: number;
  /** The job's signal: aborts waits and the request; the call then rejects with `signal.reason`, unchanged. */
  signal?: AbortSignal;
  /** @defaultValue `env().MARKETPLACE_BASE_URL` */
  baseUrl?: string;
  /** Further attempts after a network error, a timeout or a 5xx. @defaultValue 2 */
  maxRetries?: number;
  /** @defaultValue the process's limiter (`acquire` of lib/ratelimit/limiter) */
  limiter?: Pick<Limiter, "acquire">;
  /**
   * Outside a deferral context, the longest this call waits for rate limits in all (real ms);
   * beyond, `RateLimitCapExceeded`. Inside one, the context's threshold applies instead.
   * @defaultValue `maxWaitMs(timeScale)` of lib/ratelimit/limiter (125 s production, time-scaled)
   */
  maxWaitMs?: number;
  /** Scale of backoffs, waits and the request timeout. @defaultValue `env().BOUNDED_TIME_SCALE` */
  timeScale?: number;
}

export interface MarketplacePageResult {
  /** The page's records the database can store. */
  items: MarketplaceItem[];
  /** Why each other record of the page cannot be stored ("record 3: id contains a NUL character"). */
  refused: string[];
  nextPage: number | null;
}

/** Backoff before retry n (1-based): 500–1000 ms, then 1–2 s (production ms, scaled), jittered. */
const BACKOFF_BASE_MS = 500;
/**
 * One request's time limit (production ms, scaled): pages answer in 0.04–0.2 s. At least
 * `MIN_REQUEST_TIMEOUT_MS` of real time, because connecting and parsing do not shrink with the
 * time scale, and a busy event loop adds its own delay.
 */
const REQUEST_TIMEOUT_MS = 30_000;
const MIN_REQUEST_TIMEOUT_MS = 10_000;

let serverThrottles = 0;

/**
 * This process's picture of each scope's bucket at the marketplace, with every request counted
 * at the time its answer came back — the latest moment it can have reached the service. The
 * limiter counts a request when it grants the token; a request that then takes long to arrive
 * (a new connection, a busy event loop) lands closer to the next one than the limiter planned.
 * Waiting until this picture has a token makes a scope read page after page (one sync per
 * tenant and family) safe from that, whatever the delays; requests of other processes are left
 * to the limiter's margin.
 */
const arrivals = new Map<string, { tokens: number; at: number; capacity: number; refillPerMs: number }>();

function tokensAt(entry: { tokens: number; at: number; capacity: number; refillPerMs: number }, now: number): number {
  return Math.min(entry.capacity, entry.tokens + (now - entry.at) * entry.refillPerMs);
}

/** Real ms until this process's picture of the scope's bucket has a token; 0 when it has. */
function arrivalWaitMs(scope: string): number {
  const entry = arrivals.get(scope);
  if (!entry) return 0;
  const tokens = tokensAt(entry, performance.now());
  return tokens >= 1 ? 0 : Math.ceil((1 - tokens) / entry.refillPerMs);
}

/** Counts a request that may have reached the service, at the time its outcome is known. */
function countArrival(scope: string, family: Family, timeScale: number): void {
  const { capacity, refillPerMs } = bucketRate(BUCKETS[family], timeScale);
  const now = performance.now();
  const entry = arrivals.get(scope);
  const tokens = entry ? tokensAt(entry, now) : capacity;
  arrivals.set(scope, { tokens: tokens - 1, at: now, capacity, refillPerMs });
  // A full bucket and no entry are the same: forget those when the map grows.
  if (arrivals.size > 10_000) {
    for (const [key, value] of arrivals) if (tokensAt(value, now) >= value.capacity) arrivals.delete(key);
  }
}

/**
 * 429s the marketplace answered to this process. Each one is a bug signal — the limiter and
 * the service share their limits, so the limiter should never let a request through too early.
 */
export function marketplaceClientStats(): { serverThrottles: number } {
  return { serverThrottles };
}

type Outcome =
  | { type: "ok"; result: MarketplacePageResult }
  | { type: "throttled"; retryAfterMs: number | undefined; message: string }
  | {
      type: "failed";
      code: MarketplaceErrorCode;
      message: string;
      status?: number;
      retryable: boolean;
      cause?: unknown;
    };

/**
 * One page of a tenant's data in one endpoint family. Takes a token from the tenant's bucket
 * (`acquire(scopeOf(family, tenant))`) before every request, retries included, so inside a job
 * a long wait throws `RateLimitDefer` — which passes through this function untouched, as do
 * `RateLimitCapExceeded` outside a job and the signal's abort reason. Then, if this process's
 * previous request on the scope came back late, waits (same policy) until the service has
 * surely refilled a token (see `arrivals`). Network errors, timeouts
 * and 5xx are retried with backoff; a 429 is logged as a bug and retried once after its
 * `Retry-After` (through the same waiting policy), a second one is a `MarketplaceError`.
 */
export async function fetchMarketplacePage(options: FetchMarketplacePageOptions): Promise<MarketplacePageResult> {
  const { family, tenant, page, signal } = options;
  const scope = scopeOf(family, tenant);
  const maxRetries = options.maxRetries ?? 2;
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const maxWaitMs = options.maxWaitMs ?? defaultMaxWaitMs(timeScale);
  const acquire = options.limiter?.acquire ?? sharedAcquire;
  const url = new URL(
    `${(options.baseUrl ?? env().MARKETPLACE_BASE_URL).replace(/\/+$/, "")}/${encodeURIComponent(family)}`,
  );
  url.searchParams.set("tenant", tenant);
  url.searchParams.set("page", String(page));
  const timeoutMs = Math.max(MIN_REQUEST_TIMEOUT_MS, scaled(REQUEST_TIMEOUT_MS, timeScale));

  let failures = 0;
  let throttled = 0;
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    // Outside any try: RateLimitDefer, RateLimitCapExceeded and aborts are not ours to handle.
    await acquire(scope, { signal, maxWaitMs: options.maxWaitMs });
    const lateMs = arrivalWaitMs(scope);
    if (lateMs > 0) await waitForRateLimit(scope, lateMs, { signal, maxWaitMs });
    const outcome = await requestPage(url, page, timeoutMs, signal);
    countArrival(scope, family, timeScale);
    if (signal?.aborted) throw signal.reason;

    if (outcome.type === "ok") return outcome.result;
    if (outcome.type === "throttled") {
      serverThrottles++;
      const retryAfterMs = outcome.retryAfterMs ?? bucketRate(BUCKETS[family], timeScale).tokenIntervalMs;
      log.error(
        { scope, page, attempt, retryAfterMs, message: outcome.message },
        "the marketplace answered 429 although the limiter gave a token: limiter and service disagree",
      );
      if (throttled++ > 0) {
        throw new MarketplaceError(
          `the marketplace refused ${scope} page ${page} twice for its rate limit: ${outcome.message}`,
          {
            code: "throttled",
            status: 429,
            attempts: attempt,
            retryable: true,
          },
        );
      }
      await waitForRateLimit(scope, retryAfterMs, { signal, maxWaitMs });
      continue;
    }
    if (!outcome.retryable || failures >= maxRetries) {
      throw new MarketplaceError(outcome.message, {
        code: outcome.code,
        status: outcome.status,
        attempts: attempt,
        retryable: outcome.retryable,
        cause: outcome.cause,
      });
    }
    failures++;
    const backoffMs = retryBackoffMs(BACKOFF_BASE_MS, failures, timeScale);
    log.warn(
      { scope, page, attempt, status: outcome.status, backoffMs, error: outcome.message },
      "marketplace request failed, retrying",
    );
    await sleep(backoffMs, signal);
  }
}

const SERVICE = "the marketplace";

/**
 * One HTTP request through the marketplace's circuit breaker, its answer classified. Rejects only
 * with `OutsideServiceDown` (the marketplace is down: the request did not go out, or failed for
 * the outage).
 */
async function requestPage(
  url: URL,
  page: number,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<Outcome> {
  const attempt = await guardCall(
    "marketplace",
    () => attemptRequest({ method: "GET", url, headers: { accept: "application/json" }, signal, timeoutMs }),
    {
      signal,
      failureOf: (a) => (a.ok ? undefined : a),
    },
  );
  if (!attempt.ok) {
    switch (attempt.kind) {
      case "aborted":
        // The caller rethrows the signal's reason; the message is never read.
        return { type: "failed", code: "unreachable", message: "aborted", retryable: false, cause: attempt.reason };
      case "unreachable":
      case "timeout":
        return {
          type: "failed",
          code: "unreachable",
          message: describeFailure(SERVICE, attempt),
          retryable: true,
          cause: attempt.cause,
        };
      case "throttled":
        return { type: "throttled", retryAfterMs: attempt.retryAfterMs, message: describeFailure(SERVICE, attempt) };
      case "server_error":
        return {
          type: "failed",
          code: "server_error",
          status: attempt.status,
          message: describeFailure(SERVICE, attempt),
          retryable: true,
        };
      case "rejected":
        return {
          type: "failed",
          code: attempt.status === 404 ? "not_found" : "rejected",
          status: attempt.status,
          message: describeFailure(SERVICE, attempt),
          retryable: false,
        };
    }
  }
  const { status, body } = attempt.response;
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    json = undefined;
  }
  const parsed = marketplacePageSchema.safeParse(json);
  if (!parsed.success || parsed.data.page !== page) {
    const why = parsed.success ? `page ${parsed.data.page} instead of ${page}` : parsed.error.issues[0]?.message;
    return {
      type: "failed",
      code: "invalid_response",
      status,
      message: `${SERVICE} answered something other than a page (${why}): ${snippet(body)}`,
      retryable: false,
    };
  }
  return { type: "ok", result: { ...storableRecords(parsed.data.items), nextPage: parsed.data.nextPage } };
}
