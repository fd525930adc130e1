import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { scaled, sleep } from "@/lib/time";
import { ModelCallError } from "./errors";
import { postJson, type HttpPost, type HttpResponse } from "./http";
import { describeError, snippet } from "@/lib/http/describe";
import { recordInBackground, recordModelCall, type ModelCallContext, type RecordModelCall } from "./record";
import { chatCompletionErrorSchema, chatCompletionResponseSchema, type ChatMessage } from "./schemas";

const log = logger("modelcalls");

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
  /** @defaultValue `recordModelCall` (a ModelCall row per attempt) */
  record?: RecordModelCall;
  /** @defaultValue `postJson` over node:http(s) */
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

  // Appended rather than resolved, so a base URL with a path prefix (https://host/openai) keeps it.
  const url = new URL(`${(options.baseUrl ?? env().MODEL_BASE_URL).replace(/\/+$/, "")}/v1/chat/completions`);
  const body = JSON.stringify({ model, messages, ...(options.temperature === undefined ? {} : { temperature: options.temperature }) });
  const headers: Record<string, string> = { accept: "application/json" };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;

  const callStarted = performance.now();
  for (let attempt = 1; ; attempt++) {
    signal.throwIfAborted();
    const startedAt = new Date();
    const attemptStarted = performance.now();
    const result = await attemptOnce(post, url, body, headers, signal);
    const row = { ...context, model, startedAt, durationMs: performance.now() - attemptStarted };

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
    const waitMs = backoffMs(attempt, result.retryAfterMs, timeScale);
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
): Promise<Attempt> {
  let response: HttpResponse;
  try {
    response = await post(url, body, headers, signal);
  } catch (err) {
    return { ok: false, message: `network error: ${describeError(err)}`, retryable: true, cause: err };
  }
  const { status } = response;
  if (status < 200 || status >= 300) {
    return {
      ok: false,
      status,
      message: `HTTP ${status}: ${errorMessage(response.body)}`,
      retryable: status >= 500 || status === 429 || status === 408,
      retryAfterMs: retryAfterMs(response),
    };
  }
  let json: unknown;
  try {
    json = JSON.parse(response.body);
  } catch {
    return { ok: false, status, message: `response is not JSON: ${snippet(response.body)}`, retryable: false };
  }
  const parsed = chatCompletionResponseSchema.safeParse(json);
  const content = parsed.success ? parsed.data.choices[0]!.message.content : null;
  if (content === null) {
    return { ok: false, status, message: `response has no message content: ${snippet(response.body)}`, retryable: false };
  }
  return { ok: true, content };
}

function backoffMs(attempt: number, retryAfterMs: number | undefined, timeScale: number): number {
  const backoff = scaled(BACKOFF_BASE_MS * 2 ** (attempt - 1) * (1 + Math.random()), timeScale);
  return Math.max(backoff, retryAfterMs ?? 0);
}

/**
 * The wait a 429/503 asks for: `retry-after-ms` (sent by OpenAI and by the simulators, whose
 * windows are time-scaled below a second), else `retry-after` in seconds or as an HTTP date.
 * Taken as given, never scaled: it is the server's clock, not ours.
 */
export function retryAfterMs(response: Pick<HttpResponse, "header">): number | undefined {
  const ms = Number(response.header("retry-after-ms"));
  if (response.header("retry-after-ms") && Number.isFinite(ms) && ms >= 0) return ms;
  const value = response.header("retry-after")?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function errorMessage(body: string): string {
  try {
    const parsed = chatCompletionErrorSchema.safeParse(JSON.parse(body));
    if (parsed.success) return parsed.data.error.message;
  } catch {
    // not JSON: an HTML page from a proxy, for instance
  }
  return snippet(body) || "(empty body)";
}
