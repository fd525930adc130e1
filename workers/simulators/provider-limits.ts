import type { ServerResponse } from "node:http";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { bucketRate } from "@/lib/ratelimit/buckets";
import { formatResetDuration } from "@/lib/ratelimit/provider-headers";
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
  /**
   * Tokens per production minute (prompt + completion, as `usage` reports them): a bucket holding
   * a minute's worth, refilled continuously, as OpenAI's token limit works. A call is admitted
   * while the bucket holds its prompt tokens; its completion tokens are charged when it answers
   * (the bucket may then go below zero, and refills from there). Undefined: no token limit.
   */
  tpm?: number;
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
  tpm: number | null;
  /** Calls admitted and not yet answered (or abandoned by their caller). */
  inFlight: number;
  /** Calls admitted since start or the last reset. */
  admitted: number;
  /** 429s answered since start or the last reset, in all and by the limit that refused them. */
  rejected: { total: number; concurrency: number; rate: number; tokens: number };
  /** Tokens charged since start or the last reset (prompt at admission, completion at the answer). */
  tokensCharged: number;
}

export interface SimulatedProviderLimits {
  /**
   * Admits one call, or answers 429 and returns false (then nothing else is to be sent). An
   * admitted call holds its in-flight place until its response has ended or its caller has gone.
   * With a token limit, `promptTokens` must be in the bucket, and are taken. Every answer, a 429
   * included, carries OpenAI's `x-ratelimit-*` headers as they stand after the admission.
   */
  admit(res: ServerResponse, promptTokens?: number): boolean;
  /**
   * Charges an admitted call's completion tokens (when it answers, as the provider counts them),
   * and writes the rate-limit headers again as they stand now, for the answer about to be sent.
   */
  charge(res: ServerResponse, completionTokens: number): void;
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
  const tpm = options.tpm ?? null;
  const timeScale = options.timeScale ?? 1;
  // The provider counts its quota in a bucket of one second's worth (Bounded's limiter keeps half
  // of that as its burst, so requests granted apart but arriving together still fit).
  const { capacity, refillPerMs } = bucketRate(
    { capacity: Math.max(1, Math.ceil(rps)), refillPerWindow: rps, windowMs: 1_000, why: "" },
    timeScale,
  );
  let tokens = capacity;
  let tokensAt = performance.now();
  let inFlight = 0;
  let admitted = 0;
  let rejected = { total: 0, concurrency: 0, rate: 0, tokens: 0 };
  // The token bucket: a production minute's worth, refilled continuously.
  const tokenMinuteMs = Math.max(1, scaled(60_000, timeScale));
  const tokenRefillPerMs = tpm === null ? 0 : tpm / tokenMinuteMs;
  let tokenLevel = tpm ?? 0;
  let tokenLevelAt = performance.now();
  let tokensCharged = 0;

  function refillTokens(now = performance.now()): void {
    if (tpm === null) return;
    tokenLevel = Math.min(tpm, tokenLevel + (now - tokenLevelAt) * tokenRefillPerMs);
    tokenLevelAt = now;
  }

  /** OpenAI's rate-limit headers as the limits stand now (requests per minute: the per-second quota × 60). */
  function rateLimitHeaders(): Record<string, string> {
    const rpm = Math.round(rps * 60);
    const headers: Record<string, string> = {
      "x-ratelimit-limit-requests": String(rpm),
      // What the request bucket is short of full, against the per-minute figure.
      "x-ratelimit-remaining-requests": String(Math.max(0, Math.floor(rpm - (capacity - tokens)))),
      "x-ratelimit-reset-requests": formatResetDuration((capacity - tokens) / refillPerMs),
    };
    if (tpm !== null) {
      refillTokens();
      headers["x-ratelimit-limit-tokens"] = String(tpm);
      headers["x-ratelimit-remaining-tokens"] = String(Math.max(0, Math.floor(tokenLevel)));
      headers["x-ratelimit-reset-tokens"] = formatResetDuration((tpm - tokenLevel) / tokenRefillPerMs);
    }
    return headers;
  }

  function refuse(
    res: ServerResponse,
    limit: "concurrency" | "rate" | "tokens",
    waitMs: number,
    message: string,
  ): false {
    rejected.total++;
    rejected[limit]++;
    log.warn({ service, limit, waitMs }, "provider limit exceeded");
    sendJson(
      res,
      429,
      {
        error: { message, type: limit === "tokens" ? "tokens" : "requests", param: null, code: "rate_limit_exceeded" },
      },
      {
        ...rateLimitHeaders(),
        "retry-after": String(Math.max(1, Math.ceil(waitMs / 1000))),
        "retry-after-ms": String(waitMs),
      },
    );
    return false;
  }

  function admit(res: ServerResponse, promptTokens = 0): boolean {
    const now = performance.now();
    tokens = Math.min(capacity, tokens + (now - tokensAt) * refillPerMs);
    tokensAt = now;
    if (inFlight >= concurrency) {
      return refuse(
        res,
        "concurrency",
        Math.max(1, scaled(CONCURRENCY_RETRY_AFTER_MS, timeScale)),
        `Rate limit reached for ${service}: ${concurrency} requests in flight at once. Please try again shortly.`,
      );
    }
    if (tokens < 1) {
      const waitMs = Math.ceil((1 - tokens) / refillPerMs);
      return refuse(
        res,
        "rate",
        waitMs,
        `Rate limit reached for ${service}: ${rps} requests per second. Please try again in ${waitMs} ms.`,
      );
    }
    if (tpm !== null) {
      refillTokens(now);
      // A prompt larger than the whole minute's budget can never be admitted: the provider says so.
      const need = Math.min(promptTokens, tpm);
      if (tokenLevel < need) {
        const waitMs = Math.ceil((need - tokenLevel) / tokenRefillPerMs);
        return refuse(
          res,
          "tokens",
          waitMs,
          `Rate limit reached for ${service} on tokens per min (TPM): Limit ${tpm}, Used ${Math.max(0, Math.ceil(tpm - tokenLevel))}, Requested ${promptTokens}. Please try again in ${formatResetDuration(waitMs)}.`,
        );
      }
      tokenLevel -= promptTokens;
      tokensCharged += promptTokens;
    }
    tokens -= 1;
    for (const [name, value] of Object.entries(rateLimitHeaders())) res.setHeader(name, value);
    inFlight++;
    admitted++;
    // "close" comes once, whether the answer was sent or the caller left first.
    res.once("close", () => inFlight--);
    return true;
  }

  function charge(res: ServerResponse, completionTokens: number): void {
    if (tpm !== null) {
      refillTokens();
      tokenLevel -= completionTokens;
      tokensCharged += completionTokens;
    }
    if (!res.headersSent) for (const [name, value] of Object.entries(rateLimitHeaders())) res.setHeader(name, value);
  }

  const stats = (): ProviderLimitsStats => ({
    service,
    concurrency,
    rps,
    tpm,
    inFlight,
    admitted,
    rejected: { ...rejected },
    tokensCharged,
  });
  const reset = () => {
    tokens = capacity;
    tokensAt = performance.now();
    tokenLevel = tpm ?? 0;
    tokenLevelAt = performance.now();
    tokensCharged = 0;
    admitted = 0;
    rejected = { total: 0, concurrency: 0, rate: 0, tokens: 0 };
  };

  return {
    admit,
    charge,
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
export type SimulatedLimitsOverrides = Partial<Pick<ProviderLimitsOptions, "concurrency" | "rps" | "tpm">>;

const SIMULATED = {
  model: {
    statsPath: "/v1/_stats",
    concurrency: () => env().BOUNDED_SIM_MODEL_CONCURRENCY,
    rps: () => env().BOUNDED_SIM_MODEL_RPS,
    tpm: (): number | undefined => env().BOUNDED_SIM_MODEL_TPM,
  },
  ocr: {
    statsPath: "/ocr/_stats",
    concurrency: () => env().BOUNDED_SIM_OCR_CONCURRENCY,
    rps: () => env().BOUNDED_SIM_OCR_RPS,
    tpm: (): number | undefined => undefined,
  },
} as const;

/**
 * The limits of the model or OCR simulator: `overrides`, else `BOUNDED_SIM_<SERVICE>_CONCURRENCY`
 * and `_RPS`, and for the model `BOUNDED_SIM_MODEL_TPM` (by default the provider limits Bounded's own limiter enforces, so it meets no 429);
 * counters at `GET /v1/_stats` (model) or `GET /ocr/_stats` (OCR).
 */
export function simulatedProviderLimits(
  service: keyof typeof SIMULATED,
  timeScale: number,
  overrides: SimulatedLimitsOverrides = {},
): SimulatedProviderLimits {
  const spec = SIMULATED[service];
  return createProviderLimits({
    service,
    statsPath: spec.statsPath,
    timeScale,
    concurrency: overrides.concurrency ?? spec.concurrency(),
    rps: overrides.rps ?? spec.rps(),
    tpm: overrides.tpm ?? spec.tpm(),
  });
}
