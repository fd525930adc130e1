import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { key, type RedisClient } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import { familyOf, type OutsideService } from "./breaker-services";
import { runLua } from "@/lib/redis/lua";
import { luaScript, withTimeout } from "./scripts";

/**
 * Silence: an outside service that accepts calls and answers none (a frozen process, a proxy that
 * holds connections) refuses nothing, so no failure ever reaches the circuit breaker — calls just
 * hang until their job's deadline. This module sees it from the calls themselves, across jobs and
 * processes: every call that goes out is registered in Redis (silence.lua) with the time it was
 * sent, and leaves when it ends; every answer (any HTTP status, error statuses included) sets the
 * service's last answer and adds its latency to a short list of recent ones. A periodic check (in
 * each process that has calls out; lib/ratelimit/breaker.ts runs it) then calls the service silent
 * when calls it ignores — sent after every call it answered — have waited past its normal slowest
 * answer (the p99 of its recent answered calls, a stated default until measured, never under a
 * floor), and the breaker opens for it like for a refused connection. Counting only ignored calls
 * is what tells silence from the long tail: a slow call while later calls are answered is the
 * tail; and calls already being worked on when the service froze, answered after it, do not delay
 * the verdict (the service still ignores everything sent since).
 *
 * A call is registered by the transport that sends it (`sendTracked`), inside the breaker's guard
 * (`trackedCall`), so time spent waiting for a provider slot is never taken for silence.
 */

/**
 * Thresholds a lone ignored call (the only call sent since the service last answered) must wait to
 * be silence on its own: three. A service called one request at a time — one document after
 * another — never has two calls out, so without it a frozen OCR service was seen only at a job's
 * deadline, minutes in. Three thresholds is past every normal answer (OCR: about 45 s against a
 * measured p99 of 15 s; about 0.1 % of its calls, its rare tail of up to 2 min), so a frozen
 * service called one call at a time is seen within a minute once its answers are measured (90 s on
 * OCR's default threshold before), and the rare lone call that slow costs one probe, never a page
 * (the alert waits two minutes). OCR's alone: its calls are all one kind (a document read). The
 * image provider's mix instant status polls with downloads of up to a minute, so a lone download
 * is always far past the polls' p99 (seen: a healthy provider's breaker opened for a 31 s download
 * against a 10 s threshold); the model's and the marketplace's are called many at a time.
 */
export const SILENCE_LONE_THRESHOLDS = 3;

/** What silence means for one service, in production ms. */
export interface SilencePolicy {
  /** The threshold until enough answers were measured: just above the service's known p99. */
  defaultMs: number;
  /** The smallest threshold ever used, whatever was measured. */
  floorMs: number;
  /**
   * Thresholds after which the only call sent since the service last answered is silence on its
   * own (`SILENCE_LONE_THRESHOLDS`); unset, never: only a service whose calls are all of one kind
   * has a p99 that speaks for a lone call.
   */
  loneThresholds?: number;
}

/**
 * Per service. The model: production p99 ~35 s (median ~5.5 s, rare calls of minutes), so 40 s
 * before anything is measured — a hang is seen within about 40 s plus one check, well under a
 * minute — and a 10 s floor, so a run of fast answers never makes a 2 s call look like silence.
 * OCR: median ~2 s, p99 ~15 s (rare calls up to 2 min), so 30 s, twice its p99. The marketplace: pages answer in well
 * under a second, but it throttles with waits of several seconds, 15 s. Images: a status poll
 * answers at once but a download can take a minute (attempt limit 60 s), 60 s.
 */
export const SILENCE_POLICIES: Record<OutsideService, SilencePolicy> = {
  model: { defaultMs: 40_000, floorMs: 10_000 },
  ocr: { defaultMs: 30_000, floorMs: 10_000, loneThresholds: SILENCE_LONE_THRESHOLDS },
  marketplace: { defaultMs: 15_000, floorMs: 5_000 },
  images: { defaultMs: 60_000, floorMs: 10_000 },
};

/**
 * Answered calls measured before their p99 replaces the default: 50 gives a p99 that is the
 * slowest or second slowest of them — not one unlucky call — and takes a minute of normal model
 * traffic to gather.
 */
export const SILENCE_SAMPLES_NEEDED = 50;
/** Latencies kept (newest first): 200, so the p99 follows the service's last few minutes, not its history. */
export const SILENCE_SAMPLES_KEPT = 200;
/**
 * Ignored calls (sent after every call the service answered) waiting past the threshold that make
 * silence while the breaker is closed. Two: a single slow call alone is the service's normal long
 * tail (1 % of model calls take longer than the p99, some of them minutes) — on OCR until it has
 * waited `SILENCE_LONE_THRESHOLDS` thresholds — while two at once with no later call answered is already a
 * hundredth of a hundredth. A half-open breaker's probe is
 * alone by design, so there one is enough; and at a job's deadline the job's own call is enough
 * (`Breaker.downFor`): the alternative is ending the job for a service that answers nothing.
 */
export const SILENCE_CALLS_NEEDED = 2;
/**
 * Calls past twice the threshold at once that are silence even while other calls get answers (a
 * service that hangs a share of its connections): four, and at least half of those in flight. With
 * 16 model calls in flight, four past 70 s at once happens in normal traffic about never.
 */
export const SILENCE_SEVERAL = 4;
/**
 * The most a half-open probe's patience grows to, in thresholds. A probe waits the threshold, and
 * each probe of the same outage that hung doubles the next one's: a service slowed past its
 * normal slowest answer (a provider degraded tenfold) is slow, not silent, and a probe that may
 * wait long enough gets its answer — which closes the breaker and raises the threshold to twice
 * that answer (silence.lua). Sixteen: with the model's 40 s, a probe may wait up to about ten
 * minutes — the slowest model call ever seen (~11 min) — so a provider slowed fortyfold (a median
 * call of almost four minutes) is found answering after a few probes, while one slower than that
 * is as good as down for any job. A silent one still gets a new probe every cool-down (the probe's
 * lease), each waiting its patience, so its recovery is seen as soon as before.
 */
export const SILENCE_PROBE_PATIENCE_MAX = 16;
/** How often a process with calls out checks (production ms): 2 s is a few percent of the model threshold. */
export const SILENCE_CHECK_MS = 2_000;
/** The shortest check interval in real ms: at a tiny time scale, checking faster only loads Redis. */
const CHECK_FLOOR_MS = 100;
/**
 * The shortest threshold in real ms, whatever the time scale: a busy machine (two shared cores, a
 * worker process starting, a garbage collection) can hold every answer for a second or two, and
 * that does not shrink with the time scale — measured here: a 1 s floor opened the breaker of a
 * healthy simulator at time scale 0.04 while worker processes started.
 */
const THRESHOLD_FLOOR_REAL_MS = 2_000;
/**
 * A registered call's lease (production ms), renewed by its process every third of it: the entry
 * of a call whose process crashed goes within a minute, so it never counts as a call in flight.
 */
export const SILENCE_LEASE_MS = 60_000;
const LEASE_FLOOR_MS = 3_000;
/**
 * The longest a registration can live (production ms), whatever its lease: 30 min, three times the
 * slowest model call ever seen (~11 min), so a live call is never pruned, and a leaked entry is.
 */
export const SILENCE_MAX_AGE_MS = 30 * 60_000;

/** The Redis keys of a service's silence state (one hash tag: one cluster slot for the script). */
export function silenceKeys(service: OutsideService, breakerKey: string): string[] {
  const tag = `{silence:${service}}`;
  return [
    key("silence", tag, "inflight"),
    key("silence", tag, "leases"),
    key("silence", tag, "answers"),
    key("silence", tag, "latencies"),
    breakerKey,
  ];
}

/** One call the breaker guards, as the transport that sends it sees it. */
export interface TrackedCall {
  service: OutsideService;
  id: string;
  /** Aborted (with `OutsideServiceDown`) when the service's breaker opens while the call is out. */
  outage: AbortController;
  /** What was asked, for a misconfiguration's words: "POST http://…/v1/chat/completions, model gpt-4o-mini". */
  target?: string;
  /** When it was sent (real ms), while it is out. */
  sentAt?: number;
  /** When its registration reached Redis (Redis ms, comparable with `SilenceReading.answeredSent`). */
  registeredAt?: number;
  /** The job the call is made for, if any (`withCallOwner`). */
  owner?: string;
  /** The half-open breaker's probe: sent while the service was down, judged alone. */
  probe?: boolean;
}

const calls = new AsyncLocalStorage<TrackedCall>();
const owners = new AsyncLocalStorage<string>();

/** The calls of this process that are out now, by id. */
export const outstanding = new Map<string, TrackedCall>();

/** Runs `fn` (one attempt of a call, inside the breaker's guard) as a tracked call of `service`. */
export function trackedCall<T>(
  service: OutsideService,
  fn: () => Promise<T>,
): { call: TrackedCall; result: Promise<T> } {
  const call: TrackedCall = {
    service,
    id: `${hostname()}:${process.pid}:${randomUUID()}`,
    outage: new AbortController(),
    owner: owners.getStore(),
  };
  return { call, result: calls.run(call, fn) };
}

/** Runs `fn` (a job's run) so that every call it makes is known as this job's (`callsOf`). */
export function withCallOwner<T>(jobId: string, fn: () => Promise<T>): Promise<T> {
  return owners.run(jobId, fn);
}

/** The services a job has calls out to in this process, and since when each has waited (real ms). */
export function callsOf(
  jobId: string,
): { service: OutsideService; sentAt: number; registeredAt: number | undefined }[] {
  return [...outstanding.values()]
    .filter((c) => c.owner === jobId && c.sentAt !== undefined)
    .map((c) => ({ service: c.service, sentAt: c.sentAt!, registeredAt: c.registeredAt }));
}

/** What a transport needs to report a call. */
export interface Registry {
  /** Registers the call; resolves to when it was registered (Redis ms), undefined when Redis did not answer. */
  start(call: TrackedCall): Promise<number | undefined>;
  finish(call: TrackedCall, answered: boolean): Promise<void>;
}

let registry: Registry | undefined;

/** Set once by the breaker (which owns the Redis connection and the time scale). */
export function setSilenceRegistry(r: Registry): void {
  registry = r;
}

/**
 * Sends one request of the current tracked call (if any): registers it as in flight, gives the
 * transport the call's outage signal (aborted when the service's breaker opens), and records
 * whether the service answered — any HTTP status is an answer; `answered` tells it from an error.
 * Outside a guarded call it only sends.
 */
export async function sendTracked<T>(
  target: string,
  send: (outage: AbortSignal | undefined) => Promise<T>,
  answered: (outcome: { value: T } | { error: unknown }) => boolean,
): Promise<T> {
  const call = calls.getStore();
  if (!call || !registry) return send(undefined);
  call.target = target;
  call.sentAt = Date.now();
  outstanding.set(call.id, call);
  call.registeredAt = await registry.start(call);
  let outcome: { value: T } | { error: unknown };
  try {
    outcome = { value: await send(call.outage.signal) };
  } catch (error) {
    outcome = { error };
  }
  outstanding.delete(call.id);
  call.sentAt = undefined;
  call.registeredAt = undefined;
  // An answer that came while the call was being aborted for an outage still is an answer.
  await registry.finish(call, answered(outcome));
  if ("error" in outcome) throw outcome.error;
  return outcome.value;
}

/** One check's reading of a service. */
export interface SilenceReading {
  silent: boolean;
  inFlight: number;
  /** Calls that have waited past the threshold. */
  waiting: number;
  /** Real ms since the service last answered (or since the oldest call went out, when later). */
  quietMs: number;
  /** When the quiet began (real ms since the epoch). */
  since: number;
  /** The threshold used (real ms). */
  thresholdMs: number;
  /** True when the threshold is the measured p99, false when it is the default. */
  measured: boolean;
  breakerState: string;
  /** The latest send time (Redis ms) of a call the service answered: it was alive for calls sent until then. */
  answeredSent: number;
  /** When (Redis ms) the service last answered any call; 0 when it never did. */
  answeredAt: number;
  /** How long a half-open probe may wait for its answer (real ms): the threshold, longer after probes that hung. */
  patienceMs: number;
}

export interface SilenceScriptOptions {
  redis: () => RedisClient;
  timeScale: number;
  redisTimeoutMs: number;
  breakerKey: (service: OutsideService) => string;
  /** Calls past the threshold that make silence while closed. @defaultValue `SILENCE_CALLS_NEEDED` */
  callsNeeded?: number;
}

/** The only call site of silence.lua. */
export function silenceScript(options: SilenceScriptOptions) {
  const { timeScale, redisTimeoutMs } = options;
  const leaseMs = Math.max(LEASE_FLOOR_MS, scaled(SILENCE_LEASE_MS, timeScale));
  const run = <T>(service: OutsideService, args: (string | number)[]) =>
    withTimeout(
      runLua<T>(options.redis(), luaScript("silence.lua"), silenceKeys(service, options.breakerKey(service)), args),
      redisTimeoutMs,
    );
  const thresholds = (service: OutsideService) => ({
    floorMs: Math.max(THRESHOLD_FLOOR_REAL_MS, scaled(SILENCE_POLICIES[familyOf(service)].floorMs, timeScale)),
    defaultMs: Math.max(THRESHOLD_FLOOR_REAL_MS, scaled(SILENCE_POLICIES[familyOf(service)].defaultMs, timeScale)),
  });
  return {
    leaseMs,
    checkEveryMs: Math.max(CHECK_FLOOR_MS, scaled(SILENCE_CHECK_MS, timeScale)),
    start: (call: TrackedCall) => run<number>(call.service, ["start", call.id, leaseMs]),
    finish: (call: TrackedCall, answered: boolean) => {
      const { floorMs, defaultMs } = thresholds(call.service);
      return run<number>(call.service, [
        "finish",
        call.id,
        answered ? 1 : 0,
        SILENCE_SAMPLES_KEPT,
        call.probe ? 1 : 0,
        floorMs,
        defaultMs,
        SILENCE_SAMPLES_NEEDED,
      ]);
    },
    renew: (service: OutsideService, ids: string[]) => run<number>(service, ["renew", leaseMs, ...ids]),
    async check(
      service: OutsideService,
      callsNeeded = options.callsNeeded ?? SILENCE_CALLS_NEEDED,
    ): Promise<SilenceReading> {
      const { floorMs, defaultMs } = thresholds(service);
      const maxAgeMs = Math.max(leaseMs * 2, scaled(SILENCE_MAX_AGE_MS, timeScale));
      const r = await run<[string, number, number, number, number, number, number, string, number, number, number]>(
        service,
        [
          "check",
          floorMs,
          defaultMs,
          SILENCE_SAMPLES_NEEDED,
          SILENCE_SEVERAL,
          maxAgeMs,
          callsNeeded,
          SILENCE_PROBE_PATIENCE_MAX,
          SILENCE_POLICIES[familyOf(service)].loneThresholds ?? 0,
        ],
      );
      return {
        silent: r[0] === "silent",
        inFlight: Number(r[1]),
        waiting: Number(r[2]),
        quietMs: Number(r[3]),
        since: Number(r[4]),
        thresholdMs: Number(r[5]),
        measured: Number(r[6]) === 1,
        breakerState: String(r[7]),
        answeredSent: Number(r[8] ?? 0),
        answeredAt: Number(r[9] ?? 0),
        patienceMs: Number(r[10]),
      };
    },
  };
}
