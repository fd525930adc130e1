import { randomUUID } from "node:crypto";
import { env } from "@/lib/env";
import { formatDuration } from "@/lib/format/duration";
import { describeError } from "@/lib/http/describe";
import { logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { key, redis, type RedisClient } from "@/lib/redis/client";
import { scaled, unscaled } from "@/lib/time";
import { OUTSIDE_SERVICES, SERVICE_NAMES, type BreakerState, type OutsideService } from "./breaker-services";
import { OutsideServiceDown } from "./errors";
import { luaScript, runLua, withTimeout } from "./scripts";

/**
 * A circuit breaker per outside service (model, OCR, marketplace, images), its state in Redis so
 * every worker and the web see the same one (breaker.lua, one call site: `script`).
 *
 * - closed: calls go out. A streak of `BREAKER_THRESHOLD` systemic failures within
 *   `BREAKER_WINDOW_MS` — no answer (connection refused or reset, DNS), a 5xx, a timeout — opens
 *   it. An answer of any other kind (a 2xx, a 4xx about the request, a 429) is the service being
 *   up and breaks the streak; a call aborted by its own job's deadline or cancel says nothing.
 * - open: no call goes out for `BREAKER_COOLDOWN_MS`; every call throws `OutsideServiceDown`,
 *   which a job takes as "give the worker slot back until then" and the HTTP layer as a 503.
 * - half_open: the first call after the cool-down is the probe; the others keep waiting. The
 *   probe's success closes the breaker, its failure opens it again for another cool-down.
 *
 * Each state change is one error-level log line (by the process that made it), one count in
 * `bounded_outside_service_state_changes_total`, and what /, /queues and
 * `bounded_outside_service_up` show.
 */

const log = logger("ratelimit.breaker");

/**
 * Systemic failures in a row that open the breaker. Three: a call is tried three times (two
 * retries), so the failure that would fail an item is the one that opens the breaker — and the
 * call ends with `OutsideServiceDown` rather than failing its item — while one unlucky 500 among
 * the simulated 1 % never does.
 */
export const BREAKER_THRESHOLD = 3;
/** The streak counts within this window (production ms): three failures an hour apart are not an outage. */
export const BREAKER_WINDOW_MS = 30_000;
/**
 * How long an open breaker sends nothing before one probe (production ms). Thirty seconds: a
 * restart of the service takes about that, and a job waiting in delayed costs nothing meanwhile.
 */
export const BREAKER_COOLDOWN_MS = 30_000;
/** The shortest cool-down in real ms, whatever the time scale: a probe per few ms only loads a dead service. */
const COOLDOWN_FLOOR_MS = 20;
/**
 * The shortest streak window in real ms: a call's three attempts take a few ms of machine time
 * whatever the time scale, and a window shorter than that would never see a streak.
 */
const WINDOW_FLOOR_MS = 2_000;

/** Node's and undici's codes for "no answer": the service (or the way to it) is not there. */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "ECONNABORTED",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
]);
/**
 * Error names that mean no answer: the OpenAI SDK's connection errors, an attempt's own timeout
 * (`TimeoutError`, or the SDK's `APIUserAbortError` when the attempt's time limit cut it; a call
 * aborted by the job's own signal never gets this far: `guard` ignores it).
 */
const NETWORK_NAMES = new Set(["APIConnectionError", "APIConnectionTimeoutError", "TimeoutError", "APIUserAbortError"]);

/**
 * What a call's outcome says about the service: `down` (no answer, 5xx, 408, a timeout), `up`
 * (it answered, even with a refusal of the request), or `unknown` (an error that is not about
 * the service at all). Reads thrown errors (their code, their cause's, an aggregate's), the
 * OpenAI SDK's errors (`status`), an outbound attempt (`kind`), or a `{ status, cause }` result.
 */
export function serviceVerdict(outcome: unknown): "down" | "up" | "unknown" {
  if (outcome === null || typeof outcome !== "object") return "unknown";
  const o = outcome as { kind?: unknown; status?: unknown; code?: unknown; name?: unknown; cause?: unknown; errors?: unknown; message?: unknown };
  if (typeof o.kind === "string") {
    if (o.kind === "unreachable" || o.kind === "timeout" || o.kind === "server_error") return "down";
    if (o.kind === "rejected" || o.kind === "throttled") return "up";
  }
  if (typeof o.code === "string" && NETWORK_CODES.has(o.code)) return "down";
  if (typeof o.name === "string" && NETWORK_NAMES.has(o.name)) return "down";
  if (typeof o.message === "string" && /socket hang up|connection closed before the response was complete/.test(o.message)) return "down";
  if (typeof o.status === "number" && o.status > 0) return o.status >= 500 || o.status === 408 ? "down" : "up";
  for (const inner of [o.cause, ...(Array.isArray(o.errors) ? o.errors : [])]) {
    if (inner !== undefined && inner !== outcome && serviceVerdict(inner) === "down") return "down";
  }
  return "unknown";
}

/** One service's breaker as the pages read it. */
export interface BreakerReading {
  service: OutsideService;
  state: BreakerState;
  /** When it opened (open and half_open only). */
  since: Date | null;
  /** The failure that opened it (open and half_open only). */
  error: string | null;
  /** When the next probe may go (open only). */
  probeAt: Date | null;
}

export interface BreakerOptions {
  /** @defaultValue the process's shared connection, `redis()` */
  redis?: RedisClient;
  /** @defaultValue `env().BOUNDED_TIME_SCALE` */
  timeScale?: number;
  /** @defaultValue `BREAKER_THRESHOLD` */
  threshold?: number;
  /** Real ms. @defaultValue `BREAKER_WINDOW_MS` scaled, at least 2 s */
  windowMs?: number;
  /** Real ms. @defaultValue `BREAKER_COOLDOWN_MS` scaled, at least 20 ms */
  cooldownMs?: number;
  /** Real ms after which Redis not answering counts as an error (the call then goes out). @defaultValue 2000 */
  redisTimeoutMs?: number;
}

export interface GuardOptions<T> {
  /** The caller's signal: a call it aborted says nothing about the service. */
  signal?: AbortSignal;
  /**
   * For a call that reports a failure in its result instead of throwing: the failure (an error,
   * an outbound attempt, `{ status, cause }`), or undefined when the call succeeded.
   */
  failureOf?: (value: T) => unknown;
}

export interface Breaker {
  /**
   * Runs `fn` — one attempt of a call to `service` — unless the breaker is open, and records what
   * it said about the service. Throws `OutsideServiceDown` without calling `fn` while open (or
   * half-open with the probe out), and instead of the call's own failure when that failure opens
   * the breaker or finds it open: a call that failed for an outage is never its item's failure.
   */
  guard<T>(service: OutsideService, fn: () => Promise<T>, options?: GuardOptions<T>): Promise<T>;
  /** Every service's breaker; rejects when Redis cannot be asked. */
  read(): Promise<BreakerReading[]>;
}

type Reply = [decision: string, state: string, transition: string, waitMs: number, since: number, error: string];

/** The Redis hash of a service's breaker. */
export function breakerKey(service: OutsideService): string {
  return key("breaker", service);
}

/** A breaker on its own Redis connection, time scale and thresholds (tests); `guardCall` uses a shared one. */
export function createBreaker(options: BreakerOptions = {}): Breaker {
  const client = () => options.redis ?? redis();
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const threshold = options.threshold ?? BREAKER_THRESHOLD;
  const windowMs = options.windowMs ?? Math.max(WINDOW_FLOOR_MS, scaled(BREAKER_WINDOW_MS, timeScale));
  const cooldownMs = options.cooldownMs ?? Math.max(COOLDOWN_FLOOR_MS, scaled(BREAKER_COOLDOWN_MS, timeScale));
  const redisTimeoutMs = options.redisTimeoutMs ?? 2_000;
  let failing = false;

  /** The only call site of breaker.lua. Fails open: without Redis the breaker lets every call go (the provider limit stops them anyway). */
  async function script(service: OutsideService, mode: "admit" | "success" | "failure", caller: string, error = ""): Promise<Reply | null> {
    try {
      const reply = await withTimeout(
        runLua<Reply>(client(), luaScript("breaker.lua"), [breakerKey(service)], [mode, threshold, windowMs, cooldownMs, cooldownMs, error.slice(0, 300), caller]),
        redisTimeoutMs,
      );
      failing = false;
      const [decision, state, transition, waitMs, since, err] = reply;
      if (transition) announce(service, transition as BreakerState, Number(since), String(err), Number(waitMs));
      return [String(decision), String(state), String(transition), Number(waitMs), Number(since), String(err)];
    } catch (err) {
      if (!failing) log.warn({ service, error: describeError(err) }, "circuit breaker cannot reach Redis; calls go out unguarded until it can");
      failing = true;
      return null;
    }
  }

  /** The one log line and count of a state change, by the process that made it. */
  function announce(service: OutsideService, state: BreakerState, since: number, error: string, waitMs: number): void {
    metrics.outsideServiceStateChanged({ service, state });
    const name = SERVICE_NAMES[service];
    const sinceIso = new Date(since).toISOString();
    if (state === "open") log.error({ service, state, error, since: sinceIso, cooldownMs: unscaled(waitMs) }, `${name} is down since ${sinceIso} (${error}): circuit open, nothing is sent to it for ${formatDuration(unscaled(waitMs))}; jobs wait, nothing is failed for it`);
    else if (state === "half_open") log.error({ service, state, error, since: sinceIso }, `${name} is down since ${sinceIso} (${error}): circuit half-open, one probe call goes out`);
    else log.error({ service, state, error, since: sinceIso, downMs: Date.now() - since }, `${name} answers again: circuit closed after ${formatDuration(Date.now() - since)} down (since ${sinceIso}, ${error})`);
  }

  const down = (service: OutsideService, reply: Reply) =>
    new OutsideServiceDown(service, Math.max(1, reply[3]), new Date(reply[4]), reply[5], SERVICE_NAMES[service]);

  async function guard<T>(service: OutsideService, fn: () => Promise<T>, guardOptions: GuardOptions<T> = {}): Promise<T> {
    const { signal, failureOf } = guardOptions;
    const caller = randomUUID();
    const admitted = await script(service, "admit", caller);
    if (admitted?.[0] === "wait") throw down(service, admitted);

    /** Records a failure; the signal to throw instead of it when the service is (now) down. */
    const failed = async (failure: unknown): Promise<OutsideServiceDown | null> => {
      if (signal?.aborted) return null;
      const verdict = serviceVerdict(failure);
      if (verdict === "up") await script(service, "success", caller);
      if (verdict !== "down") return null;
      const reply = await script(service, "failure", caller, describeError(failure instanceof Error ? failure : (failure as { cause?: unknown }).cause ?? describeOutcome(failure)));
      return reply && reply[1] === "open" ? down(service, reply) : null;
    };

    let value: T;
    try {
      value = await fn();
    } catch (err) {
      throw (await failed(err)) ?? err;
    }
    const failure = failureOf?.(value);
    if (failure === undefined) {
      await script(service, "success", caller);
      return value;
    }
    const signalled = await failed(failure);
    if (signalled) throw signalled;
    return value;
  }

  async function read(): Promise<BreakerReading[]> {
    const c = client();
    return Promise.all(
      OUTSIDE_SERVICES.map(async (service) => {
        const h = await withTimeout(c.hgetall(breakerKey(service)), redisTimeoutMs);
        const state = (h.state ?? "closed") as BreakerState;
        if (state === "closed") return { service, state, since: null, error: null, probeAt: null };
        return { service, state, since: new Date(Number(h.since)), error: h.error ?? null, probeAt: state === "open" ? new Date(Number(h.until)) : null };
      }),
    );
  }

  return { guard, read };
}

/** The failure that opened a breaker in a few words: "connection refused", "HTTP 503", else its own text. */
export function outageCause(error: string | null): string {
  if (!error) return "no answer";
  if (/ECONNREFUSED/.test(error)) return "connection refused";
  if (/ECONNRESET|socket hang up|connection closed before/.test(error)) return "connection reset";
  if (/ENOTFOUND|EAI_AGAIN/.test(error)) return "its address could not be resolved (DNS)";
  if (/ETIMEDOUT|TimeoutError|timed out|no answer within|APIConnectionTimeoutError/i.test(error)) return "no answer in time";
  const status = /HTTP (\d{3})/.exec(error)?.[1];
  if (status) return `HTTP ${status}`;
  return error.length > 120 ? `${error.slice(0, 119)}…` : error;
}

/** A result-shaped failure in one line: its status and message. */
function describeOutcome(failure: unknown): string {
  const f = failure as { status?: unknown; message?: unknown; kind?: unknown };
  if (typeof f.message === "string" && f.message) return f.message;
  return typeof f.status === "number" ? `HTTP ${f.status}` : typeof f.kind === "string" ? f.kind : "failed";
}

let shared: Breaker | undefined;

/** The process's breakers: the shared Redis connection, the configured time scale. */
export function breakers(): Breaker {
  shared ??= createBreaker();
  return shared;
}

/** Runs one attempt of a call to `service` through its circuit breaker (see `Breaker.guard`). */
export function guardCall<T>(service: OutsideService, fn: () => Promise<T>, options?: GuardOptions<T>): Promise<T> {
  return breakers().guard(service, fn, options);
}

/** Every service's breaker, for the pages and the metrics; null when Redis cannot be read. */
export async function readBreakers(breaker: Breaker = breakers()): Promise<BreakerReading[] | null> {
  try {
    return await breaker.read();
  } catch (err) {
    log.warn({ error: describeError(err) }, "could not read the circuit breakers");
    return null;
  }
}
