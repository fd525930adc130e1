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
  const limits = new ProviderLimits(options);
  return {
    admit: (res, promptTokens) => limits.admit(res, promptTokens),
    charge: (res, completionTokens) => limits.charge(res, completionTokens),
    stats: () => limits.stats(),
    reset: () => limits.reset(),
    routes: limits.routes(),
  };
}

type Limit = "concurrency" | "rate" | "tokens";

/** One service's limits: its request bucket, its token bucket and its counters, in this process's memory. */
class ProviderLimits {
  private readonly concurrency: number;
  private readonly rps: number;
  private readonly service: string;
  private readonly statsPath: string;
  private readonly tpm: number | null;
  private readonly timeScale: number;
  /** The request bucket: one production second's worth. */
  private readonly capacity: number;
  private readonly refillPerMs: number;
  private tokens: number;
  private tokensAt: number;
  private inFlight = 0;
  private admitted = 0;
  private rejected = { total: 0, concurrency: 0, rate: 0, tokens: 0 };
  /** The token bucket: a production minute's worth, refilled continuously. */
  private readonly tokenRefillPerMs: number;
  private tokenLevel: number;
  private tokenLevelAt: number;
  private tokensCharged = 0;

  /** Both buckets full, the counters at zero. */
  constructor(options: ProviderLimitsOptions) {
    this.concurrency = options.concurrency;
    this.rps = options.rps;
    this.service = options.service;
    this.statsPath = options.statsPath;
    this.tpm = options.tpm ?? null;
    this.timeScale = options.timeScale ?? 1;
    // The provider counts its quota in a bucket of one second's worth (Bounded's limiter keeps half
    // of that as its burst, so requests granted apart but arriving together still fit).
    const { capacity, refillPerMs } = bucketRate(
      { capacity: Math.max(1, Math.ceil(this.rps)), refillPerWindow: this.rps, windowMs: 1_000, why: "" },
      this.timeScale,
    );
    this.capacity = capacity;
    this.refillPerMs = refillPerMs;
    this.tokens = capacity;
    this.tokensAt = performance.now();
    const tokenMinuteMs = Math.max(1, scaled(60_000, this.timeScale));
    this.tokenRefillPerMs = this.tpm === null ? 0 : this.tpm / tokenMinuteMs;
    this.tokenLevel = this.tpm ?? 0;
    this.tokenLevelAt = performance.now();
  }

  /** Refills the token bucket up to `now`; nothing without a token limit. */
  private refillTokens(now = performance.now()): void {
    if (this.tpm === null) return;
    this.tokenLevel = Math.min(this.tpm, this.tokenLevel + (now - this.tokenLevelAt) * this.tokenRefillPerMs);
    this.tokenLevelAt = now;
  }

  /** OpenAI's rate-limit headers as the limits stand now (requests per minute: the per-second quota × 60). */
  private rateLimitHeaders(): Record<string, string> {
    const { rps, capacity, tokens, refillPerMs, tpm } = this;
    const rpm = Math.round(rps * 60);
    const headers: Record<string, string> = {
      "x-ratelimit-limit-requests": String(rpm),
      // What the request bucket is short of full, against the per-minute figure.
      "x-ratelimit-remaining-requests": String(Math.max(0, Math.floor(rpm - (capacity - tokens)))),
      "x-ratelimit-reset-requests": formatResetDuration((capacity - tokens) / refillPerMs),
    };
    if (tpm !== null) {
      this.refillTokens();
      headers["x-ratelimit-limit-tokens"] = String(tpm);
      headers["x-ratelimit-remaining-tokens"] = String(Math.max(0, Math.floor(this.tokenLevel)));
      headers["x-ratelimit-reset-tokens"] = formatResetDuration((tpm - this.tokenLevel) / this.tokenRefillPerMs);
    }
    return headers;
  }

  /** Counts a refusal by `limit` and answers it: 429, OpenAI's body, `Retry-After` and `retry-after-ms`. */
  private refuse(res: ServerResponse, limit: Limit, waitMs: number, message: string): false {
    this.rejected.total++;
    this.rejected[limit]++;
    log.warn({ service: this.service, limit, waitMs }, "provider limit exceeded");
    sendJson(
      res,
      429,
      {
        error: { message, type: limit === "tokens" ? "tokens" : "requests", param: null, code: "rate_limit_exceeded" },
      },
      {
        ...this.rateLimitHeaders(),
        "retry-after": String(Math.max(1, Math.ceil(waitMs / 1000))),
        "retry-after-ms": String(waitMs),
      },
    );
    return false;
  }

  /** `SimulatedProviderLimits.admit`: the concurrency, then the request rate, then the tokens. */
  admit(res: ServerResponse, promptTokens = 0): boolean {
    const { service, concurrency, rps, capacity, refillPerMs } = this;
    const now = performance.now();
    this.tokens = Math.min(capacity, this.tokens + (now - this.tokensAt) * refillPerMs);
    this.tokensAt = now;
    if (this.inFlight >= concurrency) {
      return this.refuse(
        res,
        "concurrency",
        Math.max(1, scaled(CONCURRENCY_RETRY_AFTER_MS, this.timeScale)),
        `Rate limit reached for ${service}: ${concurrency} requests in flight at once. Please try again shortly.`,
      );
    }
    if (this.tokens < 1) {
      const waitMs = Math.ceil((1 - this.tokens) / refillPerMs);
      return this.refuse(
        res,
        "rate",
        waitMs,
        `Rate limit reached for ${service}: ${rps} requests per second. Please try again in ${waitMs} ms.`,
      );
    }
    if (!this.takePromptTokens(res, promptTokens, now)) return false;
    this.tokens -= 1;
    for (const [name, value] of Object.entries(this.rateLimitHeaders())) res.setHeader(name, value);
    this.inFlight++;
    this.admitted++;
    // "close" comes once, whether the answer was sent or the caller left first.
    res.once("close", () => this.inFlight--);
    return true;
  }

  /** Takes a call's prompt tokens from the token bucket, or answers 429 and returns false; true without a token limit. */
  private takePromptTokens(res: ServerResponse, promptTokens: number, now: number): boolean {
    const { tpm, service } = this;
    if (tpm === null) return true;
    this.refillTokens(now);
    // A prompt larger than the whole minute's budget can never be admitted: the provider says so.
    const need = Math.min(promptTokens, tpm);
    if (this.tokenLevel < need) {
      const waitMs = Math.ceil((need - this.tokenLevel) / this.tokenRefillPerMs);
      return this.refuse(
        res,
        "tokens",
        waitMs,
        `Rate limit reached for ${service} on tokens per min (TPM): Limit ${tpm}, Used ${Math.max(0, Math.ceil(tpm - this.tokenLevel))}, Requested ${promptTokens}. Please try again in ${formatResetDuration(waitMs)}.`,
      );
    }
    this.tokenLevel -= promptTokens;
    this.tokensCharged += promptTokens;
    return true;
  }

  /** `SimulatedProviderLimits.charge`: the completion tokens, then the headers as they stand now. */
  charge(res: ServerResponse, completionTokens: number): void {
    if (this.tpm !== null) {
      this.refillTokens();
      this.tokenLevel -= completionTokens;
      this.tokensCharged += completionTokens;
    }
    if (!res.headersSent)
      for (const [name, value] of Object.entries(this.rateLimitHeaders())) res.setHeader(name, value);
  }

  /** The counters and the limits, a copy. */
  stats(): ProviderLimitsStats {
    const { service, concurrency, rps, tpm, inFlight, admitted, rejected, tokensCharged } = this;
    return { service, concurrency, rps, tpm, inFlight, admitted, rejected: { ...rejected }, tokensCharged };
  }

  /** Refills both buckets and clears the counters (calls in flight stay counted). */
  reset(): void {
    this.tokens = this.capacity;
    this.tokensAt = performance.now();
    this.tokenLevel = this.tpm ?? 0;
    this.tokenLevelAt = performance.now();
    this.tokensCharged = 0;
    this.admitted = 0;
    this.rejected = { total: 0, concurrency: 0, rate: 0, tokens: 0 };
  }

  /** `GET` (read) and `DELETE` (reset, then read) of the stats path. */
  routes(): Route[] {
    return [
      { method: "GET", path: this.statsPath, handler: ({ res }) => sendJson(res, 200, this.stats()) },
      {
        method: "DELETE",
        path: this.statsPath,
        handler: ({ res }) => {
          this.reset();
          sendJson(res, 200, this.stats());
        },
      },
    ];
  }
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
  "backup-model": {
    statsPath: "/backup/v1/_stats",
    concurrency: () => env().BOUNDED_SIM_BACKUP_MODEL_CONCURRENCY,
    rps: () => env().BOUNDED_SIM_BACKUP_MODEL_RPS,
    tpm: (): number | undefined => env().BOUNDED_SIM_BACKUP_MODEL_TPM,
  },
  ocr: {
    statsPath: "/ocr/_stats",
    concurrency: () => env().BOUNDED_SIM_OCR_CONCURRENCY,
    rps: () => env().BOUNDED_SIM_OCR_RPS,
    tpm: (): number | undefined => undefined,
  },
} as const;

/**
 * The limits of the model, second model or OCR simulator: `overrides`, else `BOUNDED_SIM_<SERVICE>_CONCURRENCY`
 * and `_RPS`, and for the models `BOUNDED_SIM_MODEL_TPM` and `BOUNDED_SIM_BACKUP_MODEL_TPM` (by default the provider limits Bounded's own limiter enforces, so it meets no 429);
 * counters at `GET /v1/_stats` (model), `GET /backup/v1/_stats` (second model) or `GET /ocr/_stats` (OCR).
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
