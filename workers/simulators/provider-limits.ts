import type { ServerResponse } from "node:http";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { bucketRate } from "@/lib/ratelimit/buckets";
import { scaled } from "@/lib/time";
import { sendJson, type Route } from "./router";

const log = logger("simulators.limits");

/**
 * A simulated provider's own limits: at most `concurrency` calls in flight and `rps` requests per
 * production second, kept in this process's memory (the service shares nothing with Bounded's
 * limiter, as a real provider shares nothing). Beyond them it answers as OpenAI does: 429 with
 * `Retry-After` (whole seconds), `retry-after-ms` (real milliseconds, precise under a small time
 * scale) and `{ error: { message, type: "requests", code: "rate_limit_exceeded" } }`, and counts it.
 */
export interface ProviderLimitsOptions {
  /** Calls in flight at once; the next one is refused until one ends. */
  concurrency: number;
  /** Requests per production second: a token bucket holding one second's worth. */
  rps: number;
  /** @defaultValue 1 */
  timeScale?: number;
  /** The service's name in error messages and logs, e.g. "model". */
  service: string;
  /** Where the counters are read (GET) and reset (DELETE), e.g. `/v1/_stats`. */
  statsPath: string;
}

export interface ProviderLimitsStats {
  service: string;
  concurrency: number;
  rps: number;
  /** Calls admitted and not yet answered (or abandoned by their caller). */
  inFlight: number;
  /** Calls admitted since start or the last reset. */
  admitted: number;
  /** 429s answered since start or the last reset, in all and by the limit that refused them. */
  rejected: { total: number; concurrency: number; rate: number };
}

export interface SimulatedProviderLimits {
  /**
   * Admits one call, or answers 429 and returns false (then nothing else is to be sent). An
   * admitted call holds its in-flight place until its response has ended or its caller has gone.
   */
  admit(res: ServerResponse): boolean;
  stats(): ProviderLimitsStats;
  reset(): void;
  /** `GET` / `DELETE` of `statsPath`. */
  routes: Route[];
}

/**
 * Production milliseconds a caller refused for concurrency is asked to wait: the service cannot
 * know when a slot frees, and a second is a fraction of a median call (~5.5 s for the model).
 */
const CONCURRENCY_RETRY_AFTER_MS = 1_000;

export function createProviderLimits(options: ProviderLimitsOptions): SimulatedProviderLimits {
  const { concurrency, rps, service, statsPath } = options;
  const timeScale = options.timeScale ?? 1;
  // The provider counts its quota in a bucket of one second's worth (Bounded's limiter keeps half
  // of that as its burst, so requests granted apart but arriving together still fit).
  const { capacity, refillPerMs } = bucketRate({ capacity: Math.max(1, Math.ceil(rps)), refillPerWindow: rps, windowMs: 1_000, why: "" }, timeScale);
  let tokens = capacity;
  let tokensAt = performance.now();
  let inFlight = 0;
  let admitted = 0;
  let rejected = { total: 0, concurrency: 0, rate: 0 };

  function refuse(res: ServerResponse, limit: "concurrency" | "rate", waitMs: number, message: string): false {
    rejected.total++;
    rejected[limit]++;
    log.warn({ service, limit, waitMs }, "provider limit exceeded");
    sendJson(
      res,
      429,
      { error: { message, type: "requests", param: null, code: "rate_limit_exceeded" } },
      { "retry-after": String(Math.max(1, Math.ceil(waitMs / 1000))), "retry-after-ms": String(waitMs) },
    );
    return false;
  }

  function admit(res: ServerResponse): boolean {
    const now = performance.now();
    tokens = Math.min(capacity, tokens + (now - tokensAt) * refillPerMs);
    tokensAt = now;
    if (inFlight >= concurrency) {
      return refuse(res, "concurrency", Math.max(1, scaled(CONCURRENCY_RETRY_AFTER_MS, timeScale)), `Rate limit reached for ${service}: ${concurrency} requests in flight at once. Please try again shortly.`);
    }
    if (tokens < 1) {
      const waitMs = Math.ceil((1 - tokens) / refillPerMs);
      return refuse(res, "rate", waitMs, `Rate limit reached for ${service}: ${rps} requests per second. Please try again in ${waitMs} ms.`);
    }
    tokens -= 1;
    inFlight++;
    admitted++;
    // "close" comes once, whether the answer was sent or the caller left first.
    res.once("close", () => inFlight--);
    return true;
  }

  const stats = (): ProviderLimitsStats => ({ service, concurrency, rps, inFlight, admitted, rejected: { ...rejected } });
  const reset = () => {
    tokens = capacity;
    tokensAt = performance.now();
    admitted = 0;
    rejected = { total: 0, concurrency: 0, rate: 0 };
  };

  return {
    admit,
    stats,
    reset,
    routes: [
      { method: "GET", path: statsPath, handler: ({ res }) => sendJson(res, 200, stats()) },
      {
        method: "DELETE",
        path: statsPath,
        handler: ({ res }) => {
          reset();
          sendJson(res, 200, stats());
        },
      },
    ],
  };
}

/** A simulator's limits given in its options; what is left out comes from the environment. */
export type SimulatedLimitsOverrides = Partial<Pick<ProviderLimitsOptions, "concurrency" | "rps">>;

const SIMULATED = {
  model: { statsPath: "/v1/_stats", concurrency: () => env().BOUNDED_SIM_MODEL_CONCURRENCY, rps: () => env().BOUNDED_SIM_MODEL_RPS },
  ocr: { statsPath: "/ocr/_stats", concurrency: () => env().BOUNDED_SIM_OCR_CONCURRENCY, rps: () => env().BOUNDED_SIM_OCR_RPS },
} as const;

/**
 * The limits of the model or OCR simulator: `overrides`, else `BOUNDED_SIM_<SERVICE>_CONCURRENCY`
 * and `_RPS` (by default the provider limits Bounded's own limiter enforces, so it meets no 429);
 * counters at `GET /v1/_stats` (model) or `GET /ocr/_stats` (OCR).
 */
export function simulatedProviderLimits(service: keyof typeof SIMULATED, timeScale: number, overrides: SimulatedLimitsOverrides = {}): SimulatedProviderLimits {
  const spec = SIMULATED[service];
  return createProviderLimits({
    service,
    statsPath: spec.statsPath,
    timeScale,
    concurrency: overrides.concurrency ?? spec.concurrency(),
    rps: overrides.rps ?? spec.rps(),
  });
}
