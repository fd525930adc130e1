import { randomUUID } from "node:crypto";
import { env } from "@/lib/env";
import { formatDuration } from "@/lib/format/duration";
import { describeError } from "@/lib/format/describe";
import { logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { key, redis, type RedisClient } from "@/lib/redis/client";
import { scaled, unscaled } from "@/lib/time";
import { providerOfService } from "@/lib/model-providers";
import {
  familyOf,
  outsideServices,
  serviceName,
  type BreakerState,
  type OutsideService,
  type ServiceFamily,
} from "./breaker-services";
import { OutsideServiceDown } from "./errors";
import { runLua } from "@/lib/redis/lua";
import { luaScript, withTimeout } from "./scripts";
import {
  callsOf,
  setSilenceRegistry,
  silenceScript,
  trackedCall,
  type SilenceReading,
  type TrackedCall,
} from "./silence";

/**
 * A circuit breaker per outside service (model, OCR, marketplace, images), its state in Redis so
 * every worker and the web see the same one (breaker.lua, one call site: `script`).
 *
 * - closed: calls go out. A streak of `BREAKER_THRESHOLD` systemic failures within
 *   `BREAKER_WINDOW_MS` — no answer (connection refused or reset, DNS), a 5xx, a timeout — opens
 *   it, and so does silence at once: calls in flight with no answer past the service's normal
 *   slowest answer (lib/ratelimit/silence.ts; this module runs its periodic check). An answer of
 *   any other kind (a 2xx, a 4xx about the request, a 429) is the service being up and breaks the
 *   streak; a call aborted by its own job's deadline or cancel says nothing.
 * - misconfigured: an answer that refuses who we are or what we ask for — 401, 403, 404 on the
 *   API path, an unknown model (`serviceVerdict`) — is true of every call, so it is the service's
 *   outage, not the item's failure: at once, like open, with the provider's own words, the URL and
 *   model asked for (never the key). A probe after each cool-down sees a fixed configuration.
 * - open: no call goes out for `BREAKER_COOLDOWN_MS`; every call throws `OutsideServiceDown`,
 *   which a job takes as "give the worker slot back until then" and the HTTP layer as a 503. The
 *   calls this process still has out to the service are aborted with it, so hung sockets give
 *   their provider slots back and their items are released uncommitted.
 * - half_open: the first call after the cool-down is the probe; the others keep waiting. The
 *   probe's success closes the breaker, its failure (or its hanging past its patience: the
 *   silence threshold, longer after each probe that hung) opens it again for another cool-down.
 *
 * Each state change is one error-level log line (by the process that made it), one count in
 * `bounded_outside_service_state_changes_total`, and what /, /queues and
 * `bounded_outside_service_up` show.
 */

const log = logger("ratelimit.breaker");

const recoveryListeners = new Set<(service: OutsideService) => void>();

/**
 * Calls `listener` each time this process sees an outside service answer again (its probe
 * succeeded: the breaker closed). What waits for the service can then be woken at once instead
 * of at its next look. A listener must not throw. Returns the function that removes it.
 */
export function onServiceRecovered(listener: (service: OutsideService) => void): () => void {
  recoveryListeners.add(listener);
  return () => recoveryListeners.delete(listener);
}

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
/** `BREAKER_COOLDOWN_MS` in real ms at `timeScale`, at least `COOLDOWN_FLOOR_MS`. */
export function cooldownRealMs(timeScale: number = env().BOUNDED_TIME_SCALE): number {
  return Math.max(COOLDOWN_FLOOR_MS, scaled(BREAKER_COOLDOWN_MS, timeScale));
}

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
 * Whether a 404 from the service is about our configuration (the URL's path, the model) or about
 * the one thing a request asked for. The model and OCR services have one endpoint each that every
 * call uses, so a 404 there is a wrong base URL or an unknown model: every call would get it. The
 * marketplace answers 404 for a resource one tenant does not have (a shop, a page past the end)
 * and images for a render it no longer knows: that request's own answer, failed as before.
 */
const NOT_FOUND_IS_CONFIGURATION: Record<ServiceFamily, boolean> = {
  model: true,
  ocr: true,
  marketplace: false,
  images: false,
};

/** A provider's words for "no such model" (OpenAI: `model_not_found`, "The model `x` does not exist…"), whatever the status. */
const MODEL_NOT_FOUND =
  /model_not_found|\bmodel\b[^.]{0,80}\b(does not exist|not found|is not supported|unknown)|unknown model|invalid model/i;

export type ServiceVerdict = "down" | "up" | "misconfigured" | "unknown";

/**
 * What a call's outcome says about the service: `down` (no answer, 5xx, 408, a timeout),
 * `misconfigured` (401, 403, a 404 on the API path of `service` — see `NOT_FOUND_IS_CONFIGURATION`
 * — or an unknown model), `up` (it answered, even with a refusal of this request: a 400 about its
 * input such as context length exceeded, a 429), or `unknown` (an error that is not about the
 * service at all). Reads thrown errors (their code, their cause's, an aggregate's), the OpenAI
 * SDK's errors (`status`, `code`, `error`), an outbound attempt (`kind`, `status`, `response`), or
 * a `{ status, message, cause }` result. Without `service`, a bare 404 is `up`.
 */
export function serviceVerdict(outcome: unknown, service?: OutsideService): ServiceVerdict {
  if (outcome === null || typeof outcome !== "object") return "unknown";
  const o = outcome as {
    kind?: unknown;
    status?: unknown;
    code?: unknown;
    name?: unknown;
    cause?: unknown;
    errors?: unknown;
    message?: unknown;
  };
  if (typeof o.kind === "string") {
    if (o.kind === "unreachable" || o.kind === "timeout" || o.kind === "server_error") return "down";
    if (o.kind === "throttled") return "up";
  }
  if (typeof o.code === "string" && NETWORK_CODES.has(o.code)) return "down";
  if (typeof o.name === "string" && NETWORK_NAMES.has(o.name)) return "down";
  if (
    typeof o.message === "string" &&
    /socket hang up|connection closed before the response was complete/.test(o.message)
  )
    return "down";
  if (typeof o.status === "number" && o.status > 0) return statusVerdict(o.status, answerText(outcome), service);
  for (const inner of [o.cause, ...(Array.isArray(o.errors) ? o.errors : [])]) {
    if (inner === undefined || inner === outcome) continue;
    const verdict = serviceVerdict(inner, service);
    if (verdict === "down" || verdict === "misconfigured") return verdict;
  }
  return o.kind === "rejected" ? "up" : "unknown";
}

function statusVerdict(status: number, text: string, service: OutsideService | undefined): ServiceVerdict {
  if (status >= 500 || status === 408) return "down";
  if (status === 401 || status === 403) return "misconfigured";
  // Any other 4xx is about the request (context length exceeded, content refused): the item's own.
  if (status >= 400 && status < 500 && status !== 429 && MODEL_NOT_FOUND.test(text)) return "misconfigured";
  if (status === 404 && service !== undefined && NOT_FOUND_IS_CONFIGURATION[familyOf(service)]) return "misconfigured";
  return "up";
}

/** Everything an outcome says in words: its message, code, the body it carries, its cause's. */
function answerText(outcome: unknown, depth = 0): string {
  if (outcome === null || typeof outcome !== "object" || depth > 2) return "";
  const o = outcome as {
    message?: unknown;
    code?: unknown;
    error?: unknown;
    response?: { body?: unknown };
    cause?: unknown;
  };
  const parts: string[] = [];
  if (typeof o.message === "string") parts.push(o.message);
  if (typeof o.code === "string") parts.push(o.code);
  if (o.error && typeof o.error === "object") parts.push(JSON.stringify(o.error));
  if (typeof o.response?.body === "string") parts.push(o.response.body.slice(0, 2_000));
  if (o.cause !== undefined && o.cause !== outcome) parts.push(answerText(o.cause, depth + 1));
  return parts.join(" ");
}

/**
 * The words of a misconfiguration as operators read them: the provider's own message, what was
 * asked (the URL and model), never the key — OpenAI echoes a masked key ("Incorrect API key
 * provided: sk-ab***yz"), and a key could come back in any provider's text.
 */
export function misconfigurationText(failure: unknown, target: string | undefined, apiKey: string | undefined): string {
  const f = failure as { message?: unknown; status?: unknown; response?: { body?: unknown } } | null;
  let words = describeOutcome(failure);
  const body = typeof f?.response?.body === "string" ? f.response.body : "";
  const own = (() => {
    try {
      const m = (JSON.parse(body) as { error?: { message?: unknown } } | null)?.error?.message;
      return typeof m === "string" ? m : undefined;
    } catch {
      return undefined;
    }
  })();
  if (own) words = typeof f?.status === "number" ? `HTTP ${f.status}: ${own}` : own;
  else if (failure instanceof Error) words = describeError(failure);
  if (apiKey) words = words.split(apiKey).join("[key]");
  // A key ends where its sentence does: "provided: sk-ab***yz. You can find…" keeps its full stop.
  const keyed = (match: string) => (match.endsWith(".") ? "[key]." : "[key]");
  words = words
    .replace(/\b(sk|pk|rk)-[A-Za-z0-9*_.-]{3,}/g, keyed)
    .replace(
      /(api key provided:)\s*(\S+)/gi,
      (_m, lead: string, k: string) => `${lead} ${k === "[key]" || k === "[key]." ? k : keyed(k)}`,
    );
  return `misconfigured: ${words.slice(0, 300)}${target ? ` (${target})` : ""}`;
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
  /**
   * At a job's deadline: whether the services it has calls out to in this process are down — the
   * breaker open or misconfigured, or the service silent with this job's calls among the
   * unanswered (then the breaker opens now, one call being enough: the job's own call has waited
   * past the threshold with no later call answered). A job's call younger than the threshold is
   * waited for until it is judged — at most the threshold. Of `services` it has no call out to,
   * their breakers: a group of alternatives is down only when all of them are. The outage to wait
   * for, or null.
   */
  downFor(jobId: string, services?: readonly ServiceNeeded[]): Promise<OutsideServiceDown | null>;
  /**
   * A caller that waits for one answer at a time saw the service silent itself (an attempt with no
   * answer at all within its own time limit, where an answer normally comes at once): the breaker
   * opens as for silence, with `reason`; the outage to throw instead of the caller's failure.
   */
  markSilent(service: OutsideService, reason: string, since: Date): Promise<OutsideServiceDown>;
  /** One silence check of `service` now (what the periodic check does), its reading; null without Redis. */
  checkSilence(service: OutsideService, callsNeeded?: number): Promise<SilenceReading | null>;
}

type Reply = [decision: string, state: string, transition: string, waitMs: number, since: number, error: string];

/** The Redis hash of a service's breaker. */
export function breakerKey(service: OutsideService): string {
  return key("breaker", service);
}

/** One breaker's settings and what it keeps between calls: the state `createBreaker` hands each of its functions. */
interface BreakerInstance {
  /** The Redis connection, asked for at each use: `options.redis`, else the shared one. */
  client: () => RedisClient;
  timeScale: number;
  threshold: number;
  windowMs: number;
  cooldownMs: number;
  redisTimeoutMs: number;
  /** breaker.lua could not reach Redis last time: its warning is logged once per outage. */
  failing: boolean;
  silence: ReturnType<typeof silenceScript>;
  /** Silence detection could not reach Redis last time: its warning is logged once per outage. */
  silenceFailing: boolean;
  /** The calls guarded by this breaker that have not settled (one breaker per process, but tests make several). */
  mine: Set<TrackedCall>;
  /** The periodic silence check's interval, while this process has calls out. */
  watchTimer: NodeJS.Timeout | undefined;
  /** When the periodic check last renewed the calls' registrations. */
  lastRenewal: number;
  /** A periodic check is running (the next one skips its turn). */
  ticking: boolean;
}

/** A breaker on its own Redis connection, time scale and thresholds (tests); `guardCall` uses a shared one. */
export function createBreaker(options: BreakerOptions = {}): Breaker {
  const client = () => options.redis ?? redis();
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const threshold = options.threshold ?? BREAKER_THRESHOLD;
  const windowMs = options.windowMs ?? Math.max(WINDOW_FLOOR_MS, scaled(BREAKER_WINDOW_MS, timeScale));
  const cooldownMs = options.cooldownMs ?? cooldownRealMs(timeScale);
  const redisTimeoutMs = options.redisTimeoutMs ?? 2_000;
  const self: BreakerInstance = {
    client,
    timeScale,
    threshold,
    windowMs,
    cooldownMs,
    redisTimeoutMs,
    failing: false,
    silence: silenceScript({ redis: client, timeScale, redisTimeoutMs, breakerKey }),
    silenceFailing: false,
    mine: new Set<TrackedCall>(),
    watchTimer: undefined,
    lastRenewal: 0,
    ticking: false,
  };
  registerSilence(self);

  return {
    guard: (service, fn, guardOptions) => guard(self, service, fn, guardOptions),
    read: () => read(self),
    downFor: (jobId, services) => downFor(self, jobId, services),
    markSilent: (service, reason, since) => markSilent(self, service, reason, since),
    checkSilence: async (service, callsNeeded) => (await checkService(self, service, callsNeeded))?.reading ?? null,
  };
}

/** Registering calls fails open like the breaker: a call goes out whether or not Redis heard of it. */
async function quietly(self: BreakerInstance, what: () => Promise<unknown>): Promise<void> {
  try {
    await what();
    self.silenceFailing = false;
  } catch (err) {
    if (!self.silenceFailing)
      log.warn(
        { error: describeError(err) },
        "silence detection cannot reach Redis; calls go out unwatched until it can",
      );
    self.silenceFailing = true;
  }
}

/** Makes `self` the transports' silence registry: a call registered starts the periodic check. */
function registerSilence(self: BreakerInstance): void {
  setSilenceRegistry({
    start: async (call) => {
      watch(self);
      let at: number | undefined;
      await quietly(self, async () => {
        at = await self.silence.start(call);
      });
      return at;
    },
    finish: async (call, answered) => {
      await quietly(self, () => self.silence.finish(call, answered));
    },
  });
}

/** The only call site of breaker.lua. Fails open: without Redis the breaker lets every call go (the provider limit stops them anyway). */
async function script(
  self: BreakerInstance,
  service: OutsideService,
  mode: "admit" | "success" | "failure" | "silent" | "misconfigured",
  caller: string,
  error = "",
  silentSince = 0,
): Promise<Reply | null> {
  try {
    const reply = await withTimeout(
      runLua<Reply>(
        self.client(),
        luaScript("breaker.lua"),
        [breakerKey(service)],
        [
          mode,
          self.threshold,
          self.windowMs,
          self.cooldownMs,
          self.cooldownMs,
          error.slice(0, 400),
          caller,
          silentSince,
        ],
      ),
      self.redisTimeoutMs,
    );
    self.failing = false;
    const [decision, state, transition, waitMs, since, err] = reply;
    if (transition) announce(service, transition as BreakerState, Number(since), String(err), Number(waitMs));
    return [String(decision), String(state), String(transition), Number(waitMs), Number(since), String(err)];
  } catch (err) {
    if (!self.failing)
      log.warn(
        { service, error: describeError(err) },
        "circuit breaker cannot reach Redis; calls go out unguarded until it can",
      );
    self.failing = true;
    return null;
  }
}

/** The one log line and count of a state change, by the process that made it (and, when it answers again, the recovery listeners). */
function announce(service: OutsideService, state: BreakerState, since: number, error: string, waitMs: number): void {
  metrics.outsideServiceStateChanged({ service, state });
  const name = serviceName(service);
  const sinceIso = new Date(since).toISOString();
  if (state === "open")
    log.error(
      { service, state, error, since: sinceIso, cooldownMs: unscaled(waitMs) },
      `${name} is down since ${sinceIso} (${error}): circuit open, nothing is sent to it for ${formatDuration(unscaled(waitMs))}; jobs wait, nothing is failed for it`,
    );
  else if (state === "misconfigured")
    log.error(
      { service, state, error, since: sinceIso, cooldownMs: unscaled(waitMs) },
      `${name} refuses our configuration since ${sinceIso} (${error}): circuit open as misconfigured, one probe every ${formatDuration(unscaled(waitMs))}; jobs wait, nothing is failed for it — fix the configuration and restart`,
    );
  else if (state === "half_open")
    log.error(
      { service, state, error, since: sinceIso },
      `${name} is down since ${sinceIso} (${error}): circuit half-open, one probe call goes out`,
    );
  else {
    log.error(
      { service, state, error, since: sinceIso, downMs: Date.now() - since },
      `${name} answers again: circuit closed after ${formatDuration(Date.now() - since)} down (since ${sinceIso}, ${error})`,
    );
    for (const listener of recoveryListeners) listener(service);
  }
}

/** The outage a breaker.lua reply says: its wait (at least 1 ms), since when and why. */
function down(service: OutsideService, reply: Reply): OutsideServiceDown {
  return new OutsideServiceDown(service, Math.max(1, reply[3]), new Date(reply[4]), reply[5], serviceName(service));
}

/** The outage a breaker's Redis hash says, or null while it lets calls go. */
function outageOfHash(service: OutsideService, h: Record<string, string>): OutsideServiceDown | null {
  if (!isDown(h.state)) return null;
  return new OutsideServiceDown(
    service,
    Math.max(1, Number(h.until) - Date.now()),
    new Date(Number(h.since)),
    h.error ?? "",
    serviceName(service),
  );
}

/** Whether a breaker state lets no call go: open or misconfigured. */
function isDown(state: string | undefined): boolean {
  return state === "open" || state === "misconfigured";
}

/** `Breaker.guard` on `self`: admits the call, tracks it while it is out, and records what it said about the service. */
async function guard<T>(
  self: BreakerInstance,
  service: OutsideService,
  fn: () => Promise<T>,
  guardOptions: GuardOptions<T> = {},
): Promise<T> {
  const { signal, failureOf } = guardOptions;
  const caller = randomUUID();
  const admitted = await script(self, service, "admit", caller);
  if (admitted?.[0] === "wait") throw down(service, admitted);
  // The transport registers the call as in flight when it sends it, and gives it the outage
  // signal that the periodic check aborts when the breaker opens (lib/ratelimit/silence.ts).
  const { call, result } = trackedCall(service, fn);
  call.probe = admitted?.[0] === "probe";
  self.mine.add(call);
  void result.then(
    () => self.mine.delete(call),
    () => self.mine.delete(call),
  );

  let value: T;
  try {
    value = await result;
  } catch (err) {
    throw (await failed(self, service, caller, call, signal, err)) ?? err;
  }
  // An answer that arrived is kept even when the breaker opened as it came: a paid submit the
  // provider accepted, or a completion, is never thrown away (and never asked for twice).
  const failure = failureOf?.(value);
  if (failure === undefined) {
    await script(self, service, "success", caller);
    return value;
  }
  const signalled = await failed(self, service, caller, call, signal, failure);
  if (signalled) throw signalled;
  return value;
}

/** The outage that aborted `call` (the breaker opened while it was out), unless its caller's own signal did; else null. */
function cut(call: TrackedCall, signal: AbortSignal | undefined): OutsideServiceDown | null {
  return call.outage.signal.aborted && !signal?.aborted ? (call.outage.signal.reason as OutsideServiceDown) : null;
}

/** Records a failure; the signal to throw instead of it when the service is (now) down. */
async function failed(
  self: BreakerInstance,
  service: OutsideService,
  caller: string,
  call: TrackedCall,
  signal: AbortSignal | undefined,
  failure: unknown,
): Promise<OutsideServiceDown | null> {
  if (signal?.aborted) return null;
  // Aborted because the breaker opened while it was out: the outage, never the item's failure.
  const outage = cut(call, signal);
  if (outage) return outage;
  const verdict = serviceVerdict(failure, service);
  if (verdict === "up") await script(self, service, "success", caller);
  if (verdict === "misconfigured") {
    // The key masked in its words is the provider's own.
    const text = misconfigurationText(failure, call.target, providerOfService(service)?.apiKey);
    const reply = await script(self, service, "misconfigured", caller, text);
    // Without Redis the breaker cannot open, but the answer is no less true of every call: the
    // item still waits instead of failing.
    return reply
      ? down(service, reply)
      : new OutsideServiceDown(service, self.cooldownMs, new Date(), text, serviceName(service));
  }
  if (verdict !== "down") return null;
  const reply = await script(
    self,
    service,
    "failure",
    caller,
    describeError(
      failure instanceof Error ? failure : ((failure as { cause?: unknown }).cause ?? describeOutcome(failure)),
    ),
  );
  return reply && isDown(reply[1]) ? down(service, reply) : null;
}

/**
 * The periodic silence check of this process, while it has calls out: renews their
 * registrations, checks each service it has calls out to, opens a silent one's breaker, and
 * aborts its own calls to a service whose breaker is open or misconfigured (whoever opened it).
 */
function watch(self: BreakerInstance): void {
  if (self.watchTimer) return;
  self.watchTimer = setInterval(() => void tick(self), self.silence.checkEveryMs);
  self.watchTimer.unref();
}

/** One turn of the periodic silence check (none while the last is still running); stops it when no call is out. */
async function tick(self: BreakerInstance): Promise<void> {
  if (self.ticking) return;
  self.ticking = true;
  try {
    const out = [...self.mine].filter((c) => c.sentAt !== undefined);
    if (out.length === 0) {
      clearInterval(self.watchTimer);
      self.watchTimer = undefined;
      return;
    }
    const renew = Date.now() - self.lastRenewal > self.silence.leaseMs / 3;
    for (const service of new Set(out.map((c) => c.service))) {
      if (renew)
        await quietly(self, () =>
          self.silence.renew(
            service,
            out.filter((c) => c.service === service).map((c) => c.id),
          ),
        );
      await checkService(self, service);
    }
    if (renew) self.lastRenewal = Date.now();
  } finally {
    self.ticking = false;
  }
}

/** One check of `service`: its reading, after opening its breaker if silent and aborting this process's calls if down. */
async function checkService(
  self: BreakerInstance,
  service: OutsideService,
  callsNeeded?: number,
): Promise<{ reading: SilenceReading; outage: OutsideServiceDown | null } | null> {
  let reading: SilenceReading;
  try {
    reading = await self.silence.check(service, callsNeeded);
  } catch (err) {
    await quietly(self, () => Promise.reject(err));
    return null;
  }
  let outage = await readingOutage(self, service, reading);
  // A probe is judged alone, whatever else the service answers meanwhile: past its patience (the
  // threshold, longer after probes that hung) it failed. Still half-open, the breaker opens again; already closed (a later probe got through),
  // the hung one was lost by the service during its outage and would never be answered — it is
  // cut as the outage it belongs to, and its job goes on at once.
  const now = Date.now();
  const hungProbes = [...self.mine].filter(
    (c) =>
      c.service === service &&
      c.probe &&
      c.sentAt !== undefined &&
      now - c.sentAt >= reading.patienceMs &&
      !c.outage.signal.aborted,
  );
  if (!outage && hungProbes.length > 0) outage = await judgeHungProbes(self, service, reading, hungProbes, now);
  if (outage) {
    for (const c of self.mine) if (c.service === service && !c.outage.signal.aborted) c.outage.abort(outage);
  }
  return { reading, outage };
}

/** The outage a silence reading shows: a silent service's breaker opened now, or one already open or misconfigured; else null. */
async function readingOutage(
  self: BreakerInstance,
  service: OutsideService,
  reading: SilenceReading,
): Promise<OutsideServiceDown | null> {
  let outage: OutsideServiceDown | null = null;
  if (reading.silent && (reading.breakerState === "closed" || reading.breakerState === "half_open")) {
    const reply = await script(self, service, "silent", "", silenceReason(reading, self.timeScale), reading.since);
    if (reply && isDown(reply[1])) outage = down(service, reply);
  } else if (isDown(reading.breakerState)) {
    const h = await withTimeout(self.client().hgetall(breakerKey(service)), self.redisTimeoutMs).catch(() => null);
    if (h) outage = outageOfHash(service, h);
  }
  return outage;
}

/** Probes past the threshold: half-open, the breaker opens again (the outage, or null); closed, each is cut. */
async function judgeHungProbes(
  self: BreakerInstance,
  service: OutsideService,
  reading: SilenceReading,
  hungProbes: TrackedCall[],
  now: number,
): Promise<OutsideServiceDown | null> {
  let outage: OutsideServiceDown | null = null;
  if (reading.breakerState === "half_open") {
    const reply = await script(
      self,
      service,
      "silent",
      "",
      `not answering: the probe call got no answer for ${formatDuration(unscaled(now - hungProbes[0]!.sentAt!, self.timeScale))}`,
    );
    if (reply && isDown(reply[1])) outage = down(service, reply);
  } else if (reading.breakerState === "closed") {
    for (const c of hungProbes)
      c.outage.abort(
        new OutsideServiceDown(
          service,
          1,
          new Date(c.sentAt!),
          "a probe call sent while it was down was never answered",
          serviceName(service),
        ),
      );
  }
  return outage;
}

/**
 * A service a job needs, or alternatives of which it needs one (the providers of a model route,
 * which fail over to each other): down only when every one of them is.
 */
export type ServiceNeeded = OutsideService | readonly OutsideService[];

/** `Breaker.downFor` on `self`: the outage a job's calls and `services` wait for, or null. */
async function downFor(
  self: BreakerInstance,
  jobId: string,
  services: readonly ServiceNeeded[] = [],
): Promise<OutsideServiceDown | null> {
  const calling = new Set(callsOf(jobId).map((c) => c.service));
  for (const service of calling) {
    // A call of the job's younger than the threshold is not judged yet: silence or the long tail?
    // Checked again each interval until its oldest call has waited the threshold (at most that long).
    for (;;) {
      const checked = await checkService(self, service, 1);
      if (!checked) break;
      if (checked.outage) return checked.outage;
      // Still half-open: the outage is not over until a probe is answered, and this job's call out
      // there is one (only probes go out now); it waits for it as for an open breaker, whatever the
      // probe's patience (a frozen service's probe is judged by it, the job's deadline is not).
      if (checked.reading.breakerState === "half_open") {
        const h = await withTimeout(self.client().hgetall(breakerKey(service)), self.redisTimeoutMs).catch(() => null);
        if (h?.state === "half_open") return outageOfHash(service, { ...h, state: "open" });
      }
      const out = callsOf(jobId).filter((c) => c.service === service);
      if (out.length === 0) break;
      const r = checked.reading;
      const now = Date.now();
      // A service that answered a call sent after every one of this job's, and is still answering
      // (within the last two checks), is alive: a call of the job still out is its long tail, and
      // the deadline is the job's own, judged at once. One quiet for longer may have frozen just
      // after those answers (a deadline that falls 30 s into a freeze, before the threshold of
      // 40 s): it is judged as below, by the calls sent since, at most a threshold later.
      const answeredLately = now - r.answeredAt < 2 * self.silence.checkEveryMs;
      const answeredLater = out.every((c) => c.registeredAt !== undefined && r.answeredSent >= c.registeredAt);
      if (answeredLately && answeredLater) break;
      // Quiet (it may have frozen just after this job's call went out): the calls sent after its
      // last answered one decide, once the oldest has waited the threshold (`since`; with none
      // out, the job's own calls as below).
      const ignoredOut = r.quietMs > 0;
      const judgedAt =
        answeredLater && ignoredOut
          ? r.since + r.thresholdMs + self.silence.checkEveryMs
          : Math.min(...out.map((c) => c.sentAt)) + r.thresholdMs;
      if (now >= judgedAt) break;
      await new Promise((r) => setTimeout(r, Math.min(self.silence.checkEveryMs, judgedAt - Date.now() + 1)));
    }
  }
  // Services it has no call out to (waiting for a provider slot that hung calls hold, say): their
  // breaker alone; alternatives (a model route's providers) only when every one of them is down.
  for (const needed of services) {
    const alternatives = typeof needed === "string" ? [needed] : needed;
    if (alternatives.some((service) => calling.has(service))) continue;
    const outages: OutsideServiceDown[] = [];
    for (const service of alternatives) {
      const h = await withTimeout(self.client().hgetall(breakerKey(service)), self.redisTimeoutMs);
      const outage = outageOfHash(service, h);
      if (!outage) break;
      outages.push(outage);
    }
    if (outages.length > 0 && outages.length === alternatives.length) return outages[0]!;
  }
  return null;
}

/** `Breaker.read` on `self`: every service's breaker from its Redis hash. */
async function read(self: BreakerInstance): Promise<BreakerReading[]> {
  const c = self.client();
  return Promise.all(
    outsideServices().map(async (service) => {
      const h = await withTimeout(c.hgetall(breakerKey(service)), self.redisTimeoutMs);
      const state = (h.state ?? "closed") as BreakerState;
      if (state === "closed") return { service, state, since: null, error: null, probeAt: null };
      return {
        service,
        state,
        since: new Date(Number(h.since)),
        error: h.error ?? null,
        probeAt: isDown(state) ? new Date(Number(h.until)) : null,
      };
    }),
  );
}

/** `Breaker.markSilent` on `self`: opens the breaker as for silence; the outage to throw. */
async function markSilent(
  self: BreakerInstance,
  service: OutsideService,
  reason: string,
  since: Date,
): Promise<OutsideServiceDown> {
  const reply = await script(self, service, "silent", "", `not answering: ${reason}`, since.getTime());
  if (reply && isDown(reply[1])) return down(service, reply);
  return new OutsideServiceDown(service, self.cooldownMs, since, `not answering: ${reason}`, serviceName(service));
}

/** "not answering: 12 calls in flight, none answered for 3 min" — what the silence check saw, in production time. */
export function silenceReason(reading: SilenceReading, timeScale: number): string {
  const calls = `${reading.inFlight} call${reading.inFlight === 1 ? "" : "s"} in flight`;
  const limit = `its normal slowest answer is ${formatDuration(unscaled(reading.thresholdMs, timeScale))}${reading.measured ? "" : " (not yet measured: the default)"}`;
  return `not answering: ${calls}, none answered for ${formatDuration(unscaled(reading.quietMs, timeScale))} (${limit})`;
}

/** The failure that opened a breaker in a few words: "connection refused", "HTTP 503", else its own text. */
export function outageCause(error: string | null): string {
  if (!error) return "no answer";
  // Silence and misconfiguration carry their own words (the counts; the provider's message, URL and model).
  if (/^not answering:/.test(error)) return error;
  if (/^misconfigured: /.test(error)) return `it refuses our configuration — ${error.slice("misconfigured: ".length)}`;
  if (/ECONNREFUSED/.test(error)) return "connection refused";
  if (/ECONNRESET|socket hang up|connection closed before/.test(error)) return "connection reset";
  if (/ENOTFOUND|EAI_AGAIN/.test(error)) return "its address could not be resolved (DNS)";
  if (/ETIMEDOUT|TimeoutError|timed out|no answer within|APIConnectionTimeoutError/i.test(error))
    return "no answer in time";
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
