import { env } from "@/lib/env";
import { describeError, snippet } from "@/lib/http/describe";
import { attemptRequest, backoffMs, sendRequest, serviceMessage, type OutboundResponse } from "@/lib/http/outbound";
import { logger } from "@/lib/log";
import { withProviderSlot } from "@/lib/ratelimit/provider";
import { scaled, sleep } from "@/lib/time";
import { ModelCallError } from "./errors";
import { recordInBackground, recordModelCall, type ModelCallContext, type RecordModelCall } from "./record";
import { chatCompletionResponseSchema, type ChatMessage } from "./schemas";

const log = logger("modelcalls");

/** Sends one POST and reads the whole response; rejects on network errors and on abort. */
export type HttpPost = (url: URL, body: string, headers: Record<string, string>, signal: AbortSignal) => Promise<OutboundResponse>;

/** The JSON POST of `sendRequest`; the caller's signal is the only time limit. */
const postJson: HttpPost = (url, body, headers, signal) =>
  sendRequest({ method: "POST", url, body, headers: { ...headers, "content-type": "application/json" }, signal });

/**
 * The shortest attempt timeout in real ms, whatever the time scale: a busy machine or a garbage
 * collection can hold an answer that long, and that does not shrink with the time scale. Not
 * longer: at 1/50 of production time a 10 min budget is 12 s, and an abandoned attempt's wait is
 * spent from it.
 */
const MIN_ATTEMPT_TIMEOUT_REAL_MS = 2_000;

export interface ChatCompletionOptions {
  messages: ChatMessage[];
  /** @defaultValue `env().MODEL_NAME` */
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
  /** @defaultValue `env().MODEL_BASE_URL` */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer …` when set. @defaultValue `env().MODEL_API_KEY` */
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
  /** @defaultValue `recordModelCall` (a ModelCall row per attempt) */
  record?: RecordModelCall;
  /** @defaultValue `postJson` (`sendRequest` of lib/http/outbound, over node:http(s)) */
  post?: HttpPost;
}

export interface ChatCompletionResult {
  content: string;
  /** What the caller waited in all: every attempt and the backoff between them. */
  durationMs: number;
  /** HTTP attempts made (1 when the first one answered). */
  attempts: number;
}

/** Backoff before retry n (1-based): 250–500 ms, then 500–1000 ms… (scaled), jittered so that
 * a burst of failed calls does not come back in lockstep. */
const BACKOFF_BASE_MS = 250;

type Attempt =
  | { ok: true; content: string }
  | { ok: false; message: string; status?: number; retryable: boolean; retryAfterMs?: number; cause?: unknown };

/**
 * One chat completion against an OpenAI-compatible endpoint (`POST {baseUrl}/v1/chat/completions`).
 * Transient failures are retried up to `maxRetries` times; the final failure is a
 * `ModelCallError`. Nothing is retried once `signal` has aborted.
 */
export async function chatCompletion(options: ChatCompletionOptions): Promise<ChatCompletionResult> {
  const { messages, signal, context } = options;
  const model = options.model ?? env().MODEL_NAME;
  const maxRetries = options.maxRetries ?? 2;
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? scaled(5_000, timeScale);
  const apiKey = options.apiKey ?? env().MODEL_API_KEY;
  const record = options.record ?? recordModelCall;
  const post = options.post ?? postJson;
  const attemptTimeoutMs = options.attemptTimeoutMs === undefined ? undefined : Math.max(MIN_ATTEMPT_TIMEOUT_REAL_MS, scaled(options.attemptTimeoutMs, timeScale));

  // Appended rather than resolved, so a base URL with a path prefix (https://host/openai) keeps it.
  const url = new URL(`${(options.baseUrl ?? env().MODEL_BASE_URL).replace(/\/+$/, "")}/v1/chat/completions`);
  const body = JSON.stringify({ model, messages, ...(options.temperature === undefined ? {} : { temperature: options.temperature }) });
  const headers: Record<string, string> = { accept: "application/json" };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;

  const callStarted = performance.now();
  for (let attempt = 1; ; attempt++) {
    signal.throwIfAborted();
    // One provider slot per attempt, released before the backoff; the row times the attempt only.
    const { result, startedAt, durationMs } = await withProviderSlot(
      "model",
      async () => {
        const startedAt = new Date();
        const attemptStarted = performance.now();
        const result = await attemptOnce(post, url, body, headers, signal, attemptTimeoutMs);
        return { result, startedAt, durationMs: performance.now() - attemptStarted };
      },
      { signal },
    );
    const row = { ...context, model, startedAt, durationMs };

    if (result.ok) {
      recordInBackground(record, { ...row, outcome: "ok" }, "a model call");
      return { content: result.content, durationMs: Math.round(performance.now() - callStarted), attempts: attempt };
    }
    // Whatever the attempt failed with, an aborted signal is the reason; callers tell a deadline
    // from a bad item by this exact object, so it is never wrapped.
    if (signal.aborted) {
      recordInBackground(record, { ...row, outcome: "aborted", error: describeError(signal.reason) }, "a model call");
      throw signal.reason;
    }
    recordInBackground(record, { ...row, outcome: "error", error: result.message }, "a model call");

    const waitTooLong = result.retryAfterMs !== undefined && result.retryAfterMs > maxRetryAfterMs;
    if (!result.retryable || attempt > maxRetries || waitTooLong) {
      throw new ModelCallError(`model call failed after ${attempt} attempt(s): ${result.message}`, {
        status: result.status,
        attempts: attempt,
        retryable: result.retryable,
        retryAfterMs: result.retryAfterMs,
        cause: result.cause,
      });
    }
    const waitMs = retryWaitMs(attempt, result.retryAfterMs, timeScale);
    log.warn({ ...context, model, attempt, status: result.status, waitMs, error: result.message }, "model call failed, retrying");
    await sleep(waitMs, signal);
  }
}

async function attemptOnce(
  post: HttpPost,
  url: URL,
  body: string,
  headers: Record<string, string>,
  signal: AbortSignal,
  timeoutMs: number | undefined,
): Promise<Attempt> {
  const attempt = await attemptRequest({ method: "POST", url, body, headers, signal, timeoutMs }, (r) => post(r.url, body, headers, r.signal!));
  if (!attempt.ok) {
    switch (attempt.kind) {
      case "aborted":
        // The caller rethrows the signal's reason; the message is only a placeholder.
        return { ok: false, message: `aborted: ${describeError(attempt.reason)}`, retryable: false, cause: attempt.reason };
      case "unreachable":
      case "timeout":
        return { ok: false, message: `network error: ${describeError(attempt.cause)}`, retryable: true, cause: attempt.cause };
      default:
        return {
          ok: false,
          status: attempt.status,
          message: `HTTP ${attempt.status}: ${errorMessage(attempt.response.body)}`,
          retryable: attempt.retryable,
          retryAfterMs: attempt.retryAfterMs,
        };
    }
  }
  const { status, body: text } = attempt.response;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, status, message: `response is not JSON: ${snippet(text)}`, retryable: false };
  }
  const parsed = chatCompletionResponseSchema.safeParse(json);
  const content = parsed.success ? parsed.data.choices[0]!.message.content : null;
  if (content === null) {
    return { ok: false, status, message: `response has no message content: ${snippet(text)}`, retryable: false };
  }
  return { ok: true, content };
}

/** Waits the backoff, or longer when the server asked for longer. */
function retryWaitMs(attempt: number, retryAfterMs: number | undefined, timeScale: number): number {
  return Math.max(backoffMs(BACKOFF_BASE_MS, attempt, timeScale), retryAfterMs ?? 0);
}

/** The server's own words for the failure, else a snippet of what it sent. */
function errorMessage(body: string): string {
  return serviceMessage(body) ?? (snippet(body) || "(empty body)");
}
