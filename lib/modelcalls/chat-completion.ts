import OpenAI, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
  type ClientOptions,
} from "openai";
import { env } from "@/lib/env";
import { describeError, snippet } from "@/lib/format/describe";
import { nodeFetch } from "@/lib/http/node-fetch";
import { backoffMs, classifyStatus } from "@/lib/http/outbound";
import { retryAfterMs } from "@/lib/ratelimit/retry-after";
import { logger } from "@/lib/log";
import { isNoSpareSlot } from "@/lib/ratelimit/errors";
import { withProviderSlot } from "@/lib/ratelimit/provider";
import { sendTracked } from "@/lib/ratelimit/silence";
import { scaled, sleep } from "@/lib/time";
import { currentTraceHeaders, inSpan } from "@/lib/tracing/tracing";
import { FailoverRefused, ModelCallError } from "./errors";
import {
  abortedCall,
  recordInBackground,
  recordModelCall,
  type ModelCallContext,
  type RecordModelCall,
} from "./record";
import { chatCompletionResponseSchema, type ChatMessage } from "./schemas";
import { countPromptTokens } from "./tokens";
import { withLinkedSignal } from "@/lib/core/linked-signal";
import {
  failoverFor,
  modelRouting,
  providerOfService,
  routeFor,
  type FailoverCeiling,
  type ModelProvider,
} from "@/lib/model-providers";
import { isOutsideServiceDown, type OutsideServiceDown } from "@/lib/ratelimit/errors";
import { metrics, type FAILOVER_REASONS } from "@/lib/metrics/metrics";
import { currentDeadline } from "@/lib/ratelimit/context";
import { decidingDeadline, firstInTime, sendAgainAt, withSecondChance } from "./failover";
import { answerCostUsd, reserveFailover } from "./failover-spend";
import type { ModelPrices } from "./usage";

const log = logger("modelcalls");

/** The `fetch` the OpenAI client sends with (`ClientOptions["fetch"]`). */
export type ModelFetch = NonNullable<ClientOptions["fetch"]>;

/**
 * The SDK's own time limit, as good as off: `setTimeout`'s largest delay (~24.8 days; a larger
 * one would fire at once). The job's signal and `attemptTimeoutMs` are the time limits.
 */
const SDK_TIMEOUT_OFF_MS = 2 ** 31 - 1;

/**
 * The shortest attempt timeout in real ms, whatever the time scale: a busy machine or a garbage
 * collection can hold an answer that long, and that does not shrink with the time scale. Not
 * longer: at 1/50 of production time a 10 min budget is 12 s, and an abandoned attempt's wait is
 * spent from it.
 */
const MIN_ATTEMPT_TIMEOUT_REAL_MS = 2_000;

/**
 * The shortest hedge delay in real ms, whatever the time scale: longer than the attempt timeout's
 * floor, so where both are floored (a tiny time scale) the timeout sends the request again first,
 * and a machine's hiccup never has a request sent twice.
 */
const MIN_HEDGE_REAL_MS = 3_000;

export interface ChatCompletionOptions {
  messages: ChatMessage[];
  /**
   * The prompt's tokens, when the caller has counted them already (the categoriser counts each
   * row as it joins a batch): counting a whole prompt again costs more CPU than the rest of a call.
   * @defaultValue `countPromptTokens(messages)`
   */
  promptTokens?: number;
  /**
   * The providers to ask, first the one the call goes to, then each fallback it goes to while
   * those before it are down (lib/model-providers.ts).
   * @defaultValue the route of `context.jobKind`; with `model`, `baseUrl` or `apiKey` given, the
   * primary provider with them instead of its own, alone
   */
  route?: readonly ModelProvider[];
  /** The model asked for, on the primary provider alone. @defaultValue the provider's model */
  model?: string;
  /**
   * The job's signal. Required so that every model call inside a job is aborted at its deadline;
   * an aborted call rejects with `signal.reason`, unchanged.
   */
  signal: AbortSignal;
  /** Where the call comes from, written to every ModelCall row. */
  context: ModelCallContext;
  /** Further attempts after a transient failure (5xx, 429, network error). @defaultValue 2 */
  maxRetries?: number;
  temperature?: number;
  /**
   * The API's base URL, `/v1` included, as the OpenAI SDK takes it (`https://api.openai.com/v1`),
   * on the primary provider alone. @defaultValue the provider's
   */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer …` when set, on the primary provider alone. @defaultValue the provider's */
  apiKey?: string;
  /** Scale of the retry backoff. @defaultValue `env().BOUNDED_TIME_SCALE` */
  timeScale?: number;
  /**
   * The longest server-requested wait (Retry-After) spent waiting inside the call. A longer wait
   * ends the call with a retryable `ModelCallError` carrying `retryAfterMs`, so the worker slot
   * is not held for it (the caller can reschedule instead).
   * @defaultValue `scaled(5_000)`, the reschedule threshold
   */
  maxRetryAfterMs?: number;
  /**
   * Production ms one attempt may run before it is abandoned and retried (a retryable timeout):
   * for callers whose calls have a known shape, so one call in the provider's far tail does not
   * hold a provider slot, and the job's rows, for minutes. Scaled like every duration.
   * @defaultValue none: an attempt runs until it answers or the signal aborts
   */
  attemptTimeoutMs?: number;
  /**
   * Production ms an attempt may go unanswered before the same request is sent again beside it,
   * in a spare provider slot (one free that no call waits for, `ProviderSlotOptions.spare`) when
   * there is one: the first answer is the attempt's, the other request is cancelled and recorded
   * as aborted. For callers whose requests may be sent twice (a question with no side effect):
   * the provider's far tail then costs a job one median call, not the attempt timeout, whenever
   * slots sit idle — the end of an import. Scaled like every duration.
   * @defaultValue none: never sent twice
   */
  hedgeAfterMs?: number;
  /** @defaultValue `recordModelCall` (a ModelCall row per attempt) */
  record?: RecordModelCall;
  /**
   * When the call's job must end (real ms since the epoch): a provider too slow for what is left
   * is skipped, and a call still unanswered is sent again on the next provider in time (./failover.ts).
   * @defaultValue `currentDeadline()` (the job's soft deadline inside a worker run), else none
   */
  deadlineAt?: number;
  /**
   * What calls on fallbacks may spend, per job and per tenant per day (./failover-spend.ts).
   * @defaultValue the configured ceilings (`BOUNDED_FAILOVER_MAX_USD_PER_JOB`, `_PER_TENANT_DAY`)
   */
  failoverCeiling?: FailoverCeiling;
  /** What each model's tokens cost, for the ceiling. @defaultValue `BOUNDED_MODEL_PRICES` */
  prices?: ModelPrices;
  /** What the OpenAI client sends with. @defaultValue `nodeFetch` (node:http(s), no 300 s header limit) */
  fetch?: ModelFetch;
}

/** Tokens of one answer as the server counted them; undefined when it did not say. */
export interface AnswerTokens {
  promptTokens: number | undefined;
  completionTokens: number | undefined;
}

export interface ChatCompletionResult {
  content: string;
  /** What the caller waited in all: every attempt and the backoff between them. */
  durationMs: number;
  /** HTTP attempts made (1 when the first one answered). */
  attempts: number;
  /** The answering attempt's tokens. */
  usage: AnswerTokens;
  /** The provider that answered (its name: `primary`, `backup`), and the model it answered with. */
  provider: string;
  model: string;
}

/** Backoff before retry n (1-based): 250–500 ms, then 500–1000 ms… (scaled), jittered so that
 * a burst of failed calls does not come back in lockstep. */
const BACKOFF_BASE_MS = 250;

type Attempt = (
  | { ok: true; content: string; usage: AnswerTokens }
  | { ok: false; message: string; status?: number; retryable: boolean; retryAfterMs?: number; cause?: unknown }
) & {
  /** The answer's headers, when one came: the provider's rate-limit headers are read from them. */
  headers?: Headers;
};

/** An attempt that answered. */
type Answer = Extract<Attempt, { ok: true }>;

/** An attempt that failed. */
type Failure = Extract<Attempt, { ok: false }>;

/** One call's options resolved once: what each of its attempts sends, how it retries, and where it is recorded. */
interface CallPlan {
  signal: AbortSignal;
  context: ModelCallContext;
  provider: ModelProvider;
  model: string;
  maxRetries: number;
  timeScale: number;
  maxRetryAfterMs: number;
  record: RecordModelCall;
  /** Real ms, floored; undefined: no attempt timeout. */
  attemptTimeoutMs: number | undefined;
  /** Real ms, floored; undefined: never hedged. */
  hedgeAfterMs: number | undefined;
  client: OpenAI;
  request: { model: string; messages: ChatMessage[]; temperature?: number };
  tokens: { input: number; shape: string };
}

/** The route of a call: the options', the primary with the options' endpoint, or its kind's. */
function routeOf(options: ChatCompletionOptions): readonly ModelProvider[] {
  if (options.route) return options.route;
  if (options.model === undefined && options.baseUrl === undefined && options.apiKey === undefined)
    return routeFor(options.context.jobKind);
  const primary = providerOfService("model")!;
  return [
    {
      ...primary,
      model: options.model ?? primary.model,
      baseUrl: options.baseUrl ?? primary.baseUrl,
      apiKey: options.apiKey ?? primary.apiKey,
    },
  ];
}

/** The options with their defaults on `provider`, the durations scaled and floored, the client and request built. */
function planCall(options: ChatCompletionOptions, provider: ModelProvider): CallPlan {
  const { messages, signal, context } = options;
  const model = provider.model;
  const maxRetries = options.maxRetries ?? 2;
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? scaled(5_000, timeScale);
  const record = options.record ?? recordModelCall;
  const attemptTimeoutMs =
    options.attemptTimeoutMs === undefined
      ? undefined
      : Math.max(MIN_ATTEMPT_TIMEOUT_REAL_MS, scaled(options.attemptTimeoutMs, timeScale));
  const hedgeAfterMs =
    options.hedgeAfterMs === undefined
      ? undefined
      : Math.max(MIN_HEDGE_REAL_MS, scaled(options.hedgeAfterMs, timeScale));
  const client = modelClient({ ...provider, fetch: options.fetch });
  const request = {
    model,
    messages,
    ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
  };
  // Reserved from the provider's tokens per minute before each attempt, settled from its usage:
  // the prompt counted as the provider counts it; the answer estimated from calls of the same shape.
  const tokens = {
    input: options.promptTokens ?? countPromptTokens(messages),
    shape: `${model}:${context.jobKind ?? "call"}:${context.batchSize ?? 1}`,
  };
  return {
    signal,
    context,
    provider,
    model,
    maxRetries,
    timeScale,
    maxRetryAfterMs,
    record,
    attemptTimeoutMs,
    hedgeAfterMs,
    client,
    request,
    tokens,
  };
}

/** The ModelCall row's fields common to every outcome of one request. */
function rowOf(plan: CallPlan, sent: Pick<Sent, "startedAt" | "durationMs">) {
  return { ...plan.context, model: plan.model, startedAt: sent.startedAt, durationMs: sent.durationMs };
}

/**
 * One request in a provider slot (a spare one for a hedge), released before any backoff; the
 * row times the request only. `sent` is called as it goes out.
 */
function sendOnce(plan: CallPlan, attemptSignal: AbortSignal, spare: boolean, sent: () => void): Promise<Sent> {
  const { context, model, record, tokens } = plan;
  return withProviderSlot(
    plan.provider.service,
    async (call) => {
      const startedAt = new Date();
      const attemptStarted = performance.now();
      sent();
      const result = await attemptOnce(plan.client, plan.request, attemptSignal, plan.attemptTimeoutMs);
      const durationMs = performance.now() - attemptStarted;
      // Tokens settled from usage, limits learnt from the headers, a 429's wait shared (lib/ratelimit/provider.ts).
      await call.observe({
        status: result.ok ? 200 : "status" in result ? result.status : undefined,
        header: result.headers ? (name) => result.headers!.get(name) : undefined,
        usage:
          result.ok && result.usage.promptTokens !== undefined
            ? { input: result.usage.promptTokens, output: result.usage.completionTokens ?? 0 }
            : undefined,
      });
      // A failed attempt is recorded here, inside the slot: when it is the failure that opens the
      // provider's circuit breaker, the slot ends with `OutsideServiceDown` and nothing after runs.
      const recorded = !result.ok && !attemptSignal.aborted;
      if (recorded)
        recordInBackground(
          record,
          { ...context, model, startedAt, durationMs, outcome: "error", error: result.message },
          "a model call",
        );
      return { result, startedAt, durationMs, recorded };
    },
    // The provider's circuit breaker reads each attempt's failure (lib/ratelimit/breaker.ts);
    // a request cancelled here (the job's end, the other request of a hedge) says nothing of it.
    { signal: attemptSignal, tokens, spare, failureOf: ({ result }) => (result.ok ? undefined : result) },
  );
}

/**
 * A request whose answer was not the attempt's: recorded as what it was — answered, cancelled
 * for its twin's answer (`superseded`, no failure), or cancelled by the job (`aborted`).
 */
function recordLoser(plan: CallPlan, sent: Sent, why: string): void {
  const row = rowOf(plan, sent);
  if (sent.result.ok) recordInBackground(plan.record, { ...row, outcome: "ok", ...sent.result.usage }, "a model call");
  else if (!sent.recorded) {
    const ending = plan.signal.aborted ? abortedCall(plan.signal.reason) : { outcome: "superseded" as const };
    recordInBackground(plan.record, { ...row, ...ending, error: why }, "a model call");
  }
}

/** One attempt: a single request, or a hedged pair when the call hedges. */
function sendAttempt(plan: CallPlan): Promise<Sent> {
  const send = (attemptSignal: AbortSignal, spare: boolean, sent: () => void) =>
    sendOnce(plan, attemptSignal, spare, sent);
  return plan.hedgeAfterMs === undefined
    ? send(plan.signal, false, () => undefined)
    : hedged(send, plan.signal, plan.hedgeAfterMs, (loser, why) => recordLoser(plan, loser, why), {
        ...plan.context,
        model: plan.model,
      });
}

/** The answering attempt recorded, and the call's result. */
function answered(
  plan: CallPlan,
  sent: Sent,
  result: Answer,
  attempts: number,
  callStarted: number,
): ChatCompletionResult {
  recordInBackground(plan.record, { ...rowOf(plan, sent), outcome: "ok", ...result.usage }, "a model call");
  return {
    content: result.content,
    durationMs: Math.round(performance.now() - callStarted),
    attempts,
    usage: result.usage,
    provider: plan.provider.name,
    model: plan.model,
  };
}

/**
 * The retry policy's refusals after a failed attempt: the signal's reason once it has aborted,
 * else a `ModelCallError` for a failure not retryable, the last retry spent or too long a wait.
 */
function throwIfFinal(plan: CallPlan, sent: Sent, result: Failure, attempt: number): void {
  const { signal } = plan;
  // Whatever the attempt failed with, an aborted signal is the reason; callers tell a deadline
  // from a bad item by this exact object, so it is never wrapped.
  if (signal.aborted) {
    if (!sent.recorded)
      recordInBackground(plan.record, { ...rowOf(plan, sent), ...abortedCall(signal.reason) }, "a model call");
    throw signal.reason;
  }
  const waitTooLong = result.retryAfterMs !== undefined && result.retryAfterMs > plan.maxRetryAfterMs;
  if (!result.retryable || attempt > plan.maxRetries || waitTooLong) {
    throw new ModelCallError(`model call failed after ${attempt} attempt(s): ${result.message}`, {
      status: result.status,
      attempts: attempt,
      retryable: result.retryable,
      retryAfterMs: result.retryAfterMs,
      cause: result.cause,
    });
  }
}

/** The wait before the next attempt (the backoff, or the server's longer Retry-After), logged with the failure. */
function retryWait(plan: CallPlan, result: Failure, attempt: number): number {
  const waitMs = retryWaitMs(attempt, result.retryAfterMs, plan.timeScale);
  log.warn(
    { ...plan.context, model: plan.model, attempt, status: result.status, waitMs, error: result.message },
    "model call failed, retrying",
  );
  return waitMs;
}

/**
 * One chat completion against an OpenAI-compatible endpoint (`POST {baseUrl}/chat/completions`)
 * through the official OpenAI client, its own retries off: Bounded's provider limit and this
 * retry policy decide when to call again. Transient failures are retried up to `maxRetries`
 * times; the final failure is a `ModelCallError`. Nothing is retried once `signal` has aborted.
 */
export async function chatCompletion(options: ChatCompletionOptions): Promise<ChatCompletionResult> {
  const route = routeOf(options);
  const callStarted = performance.now();
  const deadlineAt = decidingDeadline(
    options.route === undefined ? failoverFor(options.context.jobKind) : "deadline",
    options.deadlineAt ?? currentDeadline(),
  );
  const promptTokens = options.promptTokens ?? countPromptTokens(options.messages);
  const onProvider = (provider: ModelProvider, signal: AbortSignal) =>
    callProvider(planCall({ ...options, signal, promptTokens }, provider), callStarted);
  // A call on a fallback: within the failover cost ceiling (refused with `FailoverRefused`), counted.
  const ceiling = options.failoverCeiling ?? modelRouting().ceiling;
  const onFallback = async (provider: ModelProvider, signal: AbortSignal, counted: () => void) => {
    const held = await reserveFailover(provider, promptTokens, options.context.jobId, ceiling, options.prices);
    if (!held.ok) throw new FailoverRefused(held.why);
    counted();
    let costUsd = 0;
    try {
      const answer = await onProvider(provider, signal);
      costUsd = answerCostUsd(answer.model, answer.usage, options.prices);
      return answer;
    } finally {
      await held.reservation
        .settle(costUsd)
        .catch((err: unknown) => log.warn({ err }, "could not settle a fallback call's cost"));
    }
  };
  const ask = (provider: ModelProvider, signal: AbortSignal, from: string, reason: FailoverReason, why: string) =>
    provider === route[0]
      ? onProvider(provider, signal)
      : onFallback(provider, signal, () => failedOver(options.context, from, provider.name, reason, why));

  const start = await firstInTime(route, deadlineAt);
  let arrived: { from: string; reason: FailoverReason; why: string } = start.skipped.length
    ? { from: start.skipped[0]!.provider, reason: "slow", why: `median ${start.skipped[0]!.p50Ms} ms` }
    : { from: route[0]!.name, reason: "down", why: "" };
  // The outage of the provider a call left, while it is on a fallback: what it waits for if refused there.
  let outage: OutsideServiceDown | null = null;
  for (let i = start.index; i < route.length; i++) {
    const provider = route[i]!;
    const next = route[i + 1];
    const here = arrived;
    try {
      const first = (p: ModelProvider, s: AbortSignal) =>
        p === provider
          ? ask(p, s, here.from, here.reason, here.why)
          : ask(p, s, provider.name, "deadline", "still unanswered");
      if (!next) return await first(provider, options.signal);
      // Unanswered when the next provider could still answer before the deadline only if asked now: asked there too.
      const at = await sendAgainAt(next, deadlineAt);
      return await withSecondChance(first, { provider, next, at }, options.signal);
    } catch (err) {
      if (err instanceof FailoverRefused) {
        // Past the ceiling: back to the route's first provider when this one was chosen for its
        // speed; while the one before is down, the call waits for it and says why.
        if (outage) throw outage.withNote(err.message);
        i = -1;
        continue;
      }
      // Down (failed, silent or refusing our configuration), with a fallback after it on the
      // route: the call goes on there. The last provider's outage is the call's: it waits.
      if (!isOutsideServiceDown(err) || !next || options.signal.aborted) throw err;
      outage = err;
      arrived = { from: provider.name, reason: "down", why: err.error };
    }
  }
  throw new Error("a model call needs a route of at least one provider");
}

type FailoverReason = (typeof FAILOVER_REASONS)[number];

/**
 * A call gone to the next provider of its route: counted (`bounded_model_failovers_total`) and
 * logged at debug — the provider's outage is logged once, by its breaker, not once per call.
 */
function failedOver(context: ModelCallContext, from: string, to: string, reason: FailoverReason, why: string): void {
  metrics.modelFailedOver.inc({ kind: context.jobKind ?? "", from, to, reason });
  log.debug(
    { ...context, provider: from, fallback: to, reason, why },
    "a model call went to the next provider of its route",
  );
}

/** One call on one provider: its attempts, retried as the policy says. */
async function callProvider(plan: CallPlan, callStarted: number): Promise<ChatCompletionResult> {
  for (let attempt = 1; ; attempt++) {
    plan.signal.throwIfAborted();
    const sent = await sendAttempt(plan);
    if (sent.result.ok) return answered(plan, sent, sent.result, attempt, callStarted);
    throwIfFinal(plan, sent, sent.result, attempt);
    await sleep(retryWait(plan, sent.result, attempt), plan.signal);
  }
}

/** One request's outcome, as the attempt loop reads it. */
interface Sent {
  result: Attempt;
  startedAt: Date;
  durationMs: number;
  /** Its failure was recorded already (inside the slot). */
  recorded: boolean;
}

/**
 * One attempt, hedged: the request goes out; once it has gone `hedgeAfterMs` (real) unanswered,
 * the same request goes out again in a spare provider slot as soon as there is one. The first
 * answer is the attempt's and the other request is cancelled; a failure waits for the other
 * request. The request not taken is handed to `recordLoser`. Errors are the first request's: the
 * hedge is best effort (no spare slot, the breaker open, Redis away: it is simply not sent).
 */
async function hedged(
  send: (attemptSignal: AbortSignal, spare: boolean, sent: () => void) => Promise<Sent>,
  signal: AbortSignal,
  hedgeAfterMs: number,
  recordLoser: (sent: Sent, why: string) => void,
  context: ModelCallContext & { model: string },
): Promise<Sent> {
  const settled = (p: Promise<unknown>) =>
    p.then(
      () => true,
      () => true,
    );
  const firstStop = new AbortController();
  const timerStop = new AbortController();
  let markSent: () => void = () => undefined;
  const sentOut = new Promise<void>((resolve) => {
    markSent = resolve;
  });
  const first = withLinkedSignal([signal, firstStop.signal], (linked) => send(linked, false, markSent));
  const due = sentOut
    .then(() => withLinkedSignal([signal, timerStop.signal], (linked) => sleep(hedgeAfterMs, linked)))
    .then(
      () => false,
      () => false,
    );
  const firstBeforeDue = await Promise.race([settled(first), due]);
  timerStop.abort();
  if (firstBeforeDue || signal.aborted) return first;
  const firstOver = new AbortController();
  void settled(first).then(() => firstOver.abort());

  const why = (answered: string) =>
    signal.aborted
      ? `aborted: ${describeError(signal.reason)}`
      : `cancelled: the same request ${answered} answered first`;
  const secondStop = new AbortController();
  // Asked again every eighth of the delay while the first request is out: the slots free up as the
  // rest of the job's calls end, which is when the hedge matters.
  const second = (async (): Promise<Sent | null> => {
    const waited = performance.now();
    while (!firstOver.signal.aborted) {
      try {
        return await withLinkedSignal([signal, secondStop.signal], (linked) =>
          send(linked, true, () =>
            log.info(
              { ...context, unansweredRealMs: Math.round(hedgeAfterMs + performance.now() - waited) },
              "a model request went unanswered; the same request sent again in a spare slot",
            ),
          ),
        );
      } catch (err) {
        if (!isNoSpareSlot(err)) return null;
      }
      await withLinkedSignal([signal, firstOver.signal], (linked) => sleep(hedgeAfterMs / 8, linked)).catch(
        () => undefined,
      );
    }
    return null;
  })();
  const firstDone = await Promise.race([settled(first), second.then(() => false)]);
  if (firstDone) {
    const outcome = await first.catch(() => null);
    if (!outcome || outcome.result.ok) {
      secondStop.abort();
      void second.then((s) => s && recordLoser(s, why("sent first")));
      return first;
    }
    // The first request failed; the second may still answer.
    const other = await second;
    if (!other?.result.ok) {
      if (other) recordLoser(other, why("sent first"));
      return first;
    }
    recordLoser(outcome, why("sent again"));
    return other;
  }
  const other = await second;
  // No spare slot, or the second request failed: the first one's answer is the attempt's.
  if (!other?.result.ok) {
    if (other) recordLoser(other, why("sent first"));
    return first;
  }
  firstStop.abort();
  void first.then(
    (s) => recordLoser(s, why("sent again")),
    () => undefined,
  );
  return other;
}

/**
 * The OpenAI client of one call: retries and time limit off, as `chatCompletion` decides both.
 * Also what `npm run provider:check` calls the model with, so it checks what the workers send.
 */
export function modelClient(options: Pick<ChatCompletionOptions, "baseUrl" | "apiKey" | "fetch">): OpenAI {
  // Unset, the primary provider's (what the batch service and `provider:check` ask).
  const apiKey = options.baseUrl === undefined ? (options.apiKey ?? env().MODEL_API_KEY) : options.apiKey;
  const baseURL = options.baseUrl ?? env().MODEL_BASE_URL;
  if (options.fetch) return newModelClient(baseURL, apiKey, options.fetch);
  // One client per endpoint and key: building one costs a call more CPU than its request.
  const key = `${baseURL}\n${apiKey ?? ""}`;
  let client = clients.get(key);
  if (!client) {
    if (clients.size >= 64) clients.clear();
    client = newModelClient(baseURL, apiKey, nodeFetch);
    clients.set(key, client);
  }
  return client;
}

const clients = new Map<string, OpenAI>();

function newModelClient(baseURL: string, apiKey: string | undefined, fetch: typeof nodeFetch): OpenAI {
  return new OpenAI({
    // The SDK appends the path (`/chat/completions`) to this as it is: `/v1` is the URL's own.
    baseURL,
    // The SDK insists on a key; a server without authentication gets no Authorization header.
    apiKey: apiKey ?? "none",
    defaultHeaders: apiKey ? undefined : { authorization: null },
    maxRetries: 0,
    timeout: SDK_TIMEOUT_OFF_MS,
    fetch,
    logger: log,
  });
}

async function attemptOnce(
  client: OpenAI,
  request: { model: string; messages: ChatMessage[]; temperature?: number },
  signal: AbortSignal,
  timeoutMs: number | undefined,
): Promise<Attempt> {
  const timeout = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
  let answer: unknown;
  let headers: Headers;
  try {
    // A client span of the job's trace, carried as `traceparent`, like every outbound call (lib/http/outbound.ts).
    // A call in flight of the model service (silence detection, lib/ratelimit/silence.ts): any
    // HTTP status is an answer; the outage signal cuts it when the model's breaker opens.
    // The target names the service in a misconfiguration's reason: origin and path only, so
    // credentials or a query in the base URL never reach the breaker, the pages or the logs.
    const base = new URL(client.baseURL);
    ({
      data: answer,
      response: { headers },
    } = await sendTracked(
      `POST ${base.origin}${base.pathname.replace(/\/+$/, "")}/chat/completions, model ${request.model}`,
      (outage) =>
        inSpan(
          `POST ${client.baseURL}/chat/completions`,
          { kind: "client", attributes: { "http.request.method": "POST", "gen_ai.request.model": request.model } },
          () =>
            withLinkedSignal([signal, timeout, outage], (linked) =>
              client.chat.completions
                .create(request, { signal: linked, headers: currentTraceHeaders() })
                .withResponse(),
            ),
        ),
      (outcome) => "value" in outcome || (outcome.error instanceof APIError && outcome.error.status !== undefined),
    ));
  } catch (err) {
    return {
      ...failedAttempt(err, signal, timeout, timeoutMs),
      headers: err instanceof APIError ? err.headers : undefined,
    };
  }
  const parsed = chatCompletionResponseSchema.safeParse(answer);
  const content = parsed.success ? parsed.data.choices[0]!.message.content : null;
  if (!parsed.success || content === null) {
    const text = typeof answer === "string" ? answer : JSON.stringify(answer);
    return {
      ok: false,
      status: 200,
      message: `response has no message content: ${snippet(text ?? "")}`,
      retryable: false,
      headers,
    };
  }
  const usage = parsed.data.usage;
  return {
    ok: true,
    content,
    usage: { promptTokens: usage?.prompt_tokens, completionTokens: usage?.completion_tokens },
    headers,
  };
}

/** The SDK's errors in Bounded's terms: what failed, and whether another attempt may succeed. */
function failedAttempt(
  err: unknown,
  signal: AbortSignal,
  timeout: AbortSignal | undefined,
  timeoutMs: number | undefined,
): Attempt {
  // The caller rethrows the signal's reason; the message is only a placeholder.
  if (signal.aborted)
    return { ok: false, message: `aborted: ${describeError(signal.reason)}`, retryable: false, cause: signal.reason };
  if (timeout?.aborted || err instanceof APIConnectionTimeoutError) {
    return {
      ok: false,
      message: `network error: no answer within ${timeoutMs ?? SDK_TIMEOUT_OFF_MS} ms`,
      retryable: true,
      cause: err,
    };
  }
  if (err instanceof APIConnectionError || err instanceof APIUserAbortError) {
    return {
      ok: false,
      message: `network error: ${describeError(err.cause ?? err)}`,
      retryable: true,
      cause: err.cause ?? err,
    };
  }
  if (err instanceof APIError && err.status !== undefined) {
    const headers = err.headers;
    return {
      ok: false,
      status: err.status,
      message: `HTTP ${err.status}: ${apiErrorMessage(err)}`,
      retryable: classifyStatus(err.status) !== "rejected",
      retryAfterMs: headers ? retryAfterMs({ header: (name) => headers.get(name) ?? undefined }) : undefined,
      cause: err,
    };
  }
  // A body that is not JSON, or cut short while it was read.
  if (err instanceof SyntaxError)
    return { ok: false, status: 200, message: `response is not JSON: ${err.message}`, retryable: false, cause: err };
  return { ok: false, message: `network error: ${describeError(err)}`, retryable: true, cause: err };
}

/** The server's own words for the failure (`{ error: { message } }`), else what the SDK made of the body. */
function apiErrorMessage(err: APIError): string {
  const body = err.error as { message?: unknown } | undefined;
  if (typeof body?.message === "string" && body.message) return body.message;
  // The SDK's message starts with the status: "500 status code (no body)", "502 <html>…".
  return snippet(err.message.replace(/^\d{3} /, "")) || "(empty body)";
}

/** Waits the backoff, or longer when the server asked for longer. */
function retryWaitMs(attempt: number, retryAfterMs: number | undefined, timeScale: number): number {
  return Math.max(backoffMs(BACKOFF_BASE_MS, attempt, timeScale), retryAfterMs ?? 0);
}
