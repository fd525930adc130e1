import {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
  type OpenAI,
  toFile,
} from "openai";
import { z } from "zod";
import { env } from "@/lib/env";
import { describeError, snippet } from "@/lib/format/describe";
import { nodeFetch } from "@/lib/http/node-fetch";
import { backoffMs, classifyStatus } from "@/lib/http/outbound";
import { logger } from "@/lib/log";
import { guardCall } from "@/lib/ratelimit/breaker";
import { retryAfterMs } from "@/lib/ratelimit/retry-after";
import { sendTracked } from "@/lib/ratelimit/silence";
import { scaled, sleep } from "@/lib/time";
import { type ModelFetch, modelClient } from "./chat-completion";
import { ModelCallError } from "./errors";
import { type ChatMessage, chatCompletionResponseSchema, MAX_BATCH_REQUESTS } from "./schemas";
import { withLinkedSignal } from "@/lib/core/linked-signal";

const log = logger("modelcalls.batches");

/**
 * The platform's client of an OpenAI-compatible Batch API (`/v1/files`, `/v1/batches`): it hands
 * a set of chat completions to the provider at once, to be answered within its 24 h window at a
 * lower price, and reads the answers back. The same endpoint, key and model as the sync calls
 * (`MODEL_BASE_URL`, `MODEL_API_KEY`, `MODEL_NAME`, resolved by `modelClient`), every request at
 * temperature 0. Each HTTP call goes through the model's circuit breaker and silence detection
 * like a chat completion, with its own time limit, so a silent service never holds a caller:
 * - 401/403 — the model service is misconfigured: `OutsideServiceDown` (the breaker opens as
 *   misconfigured, as for a chat completion);
 * - 5xx, 429, a network error, no answer within the time limit — retried up to `maxRetries`
 *   times, then a retryable `ModelCallError` (or `OutsideServiceDown` once the breaker opens);
 * - 404 — a retryable-false `ModelCallError` with status 404: no such batch or file, or no batch
 *   API at that URL (a server that serves chat completions only); the breaker is not opened for
 *   it, since the sync calls may well work;
 * - any other 4xx (a refused file, a batch that cannot be cancelled) — a `ModelCallError` that is
 *   not retryable, with the provider's own words.
 * An aborted `signal` rejects with its reason, unchanged.
 */

/** One chat completion of a batch: its id within the batch, and its messages. */
export interface BatchRequest {
  customId: string;
  messages: ChatMessage[];
}

export type BatchStatus =
  | "validating"
  | "in_progress"
  | "finalizing"
  | "completed"
  | "expired"
  | "failed"
  | "cancelling"
  | "cancelled";

/** The statuses after which a batch changes no more. */
export const FINISHED_BATCH_STATUSES: readonly BatchStatus[] = ["completed", "expired", "failed", "cancelled"];

/** A batch as the provider reports it. */
export interface BatchState {
  id: string;
  status: BatchStatus;
  /** Requests in the batch (0 while it is validating, at some providers). */
  total: number;
  /** Requests answered so far. */
  completed: number;
  /** Requests that failed; once a batch expired or was cancelled, also those never done. */
  failed: number;
  /** The answers, once it ended (completed, or partial after a cancel or an expiry). */
  outputFileId: string | null;
  /** The failed and not-done requests, once it ended. */
  errorFileId: string | null;
  createdAt: Date;
  /** When the 24 h window ends. */
  expiresAt: Date | null;
}

/** One request's answer, with the tokens the provider counted (0 when it did not say). */
export interface BatchAnswer {
  content: string;
  promptTokens: number;
  completionTokens: number;
}

/**
 * How long one HTTP call of the batch service may take (production ms) before it is abandoned
 * as unanswered: two minutes, time enough to upload or download a file of tens of thousands of
 * requests, and far above a status read's usual second. Scaled, never under 2 s real.
 */
export const BATCH_REQUEST_TIMEOUT_MS = 120_000;
const MIN_REQUEST_TIMEOUT_REAL_MS = 2_000;
/** Metadata OpenAI keeps per batch: 16 keys, keys up to 64 characters, values up to 512. */
const METADATA_KEYS = 16;

/** Where and how the calls go; every field defaults to what the sync calls use. */
export interface BatchServiceOptions {
  /** The caller's signal: an aborted call rejects with its reason. */
  signal?: AbortSignal;
  /** @defaultValue `env().MODEL_BASE_URL` */
  baseUrl?: string;
  /** @defaultValue `env().MODEL_API_KEY` */
  apiKey?: string;
  /** @defaultValue `env().BOUNDED_TIME_SCALE` */
  timeScale?: number;
  /** Production ms one HTTP call may take. @defaultValue `BATCH_REQUEST_TIMEOUT_MS` */
  requestTimeoutMs?: number;
  /** Further attempts after a transient failure. @defaultValue 2 */
  maxRetries?: number;
  fetch?: ModelFetch;
}

export interface SubmitBatchOptions extends BatchServiceOptions {
  /** Where the batch comes from (job, tenant…): kept as the batch's metadata (16 keys, as strings) and logged. */
  context?: Record<string, unknown>;
  /** @defaultValue `env().MODEL_NAME` */
  model?: string;
}

const batchSchema = z.object({
  id: z.string().min(1),
  status: z.enum([
    "validating",
    "in_progress",
    "finalizing",
    "completed",
    "expired",
    "failed",
    "cancelling",
    "cancelled",
  ]),
  request_counts: z.object({ total: z.number(), completed: z.number(), failed: z.number() }).nullish(),
  output_file_id: z.string().nullish(),
  error_file_id: z.string().nullish(),
  created_at: z.number(),
  expires_at: z.number().nullish(),
});

const fileSchema = z.object({ id: z.string().min(1) });

const outputLineSchema = z.object({
  custom_id: z.string(),
  response: z.object({ status_code: z.number(), body: z.unknown() }).nullish(),
});

/** Hands `requests` to the batch service: uploads them as a batch file and creates the batch. */
export async function submitBatch(requests: BatchRequest[], options: SubmitBatchOptions = {}): Promise<BatchState> {
  if (requests.length === 0) throw new RangeError("a batch needs at least one request");
  if (requests.length > MAX_BATCH_REQUESTS)
    throw new RangeError(`a batch takes at most ${MAX_BATCH_REQUESTS} requests, not ${requests.length}`);
  const ids = new Set(requests.map((r) => r.customId));
  if (ids.size !== requests.length) throw new RangeError("the requests of a batch need distinct custom ids");

  const model = options.model ?? env().MODEL_NAME;
  const jsonl = requests
    .map((r) =>
      JSON.stringify({
        custom_id: r.customId,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model, messages: r.messages, temperature: 0 },
      }),
    )
    .join("\n");
  const file = await call(
    "upload",
    "POST /files",
    async (client, signal) =>
      fileSchema.parse(
        await client.files.create(
          { file: await toFile(Buffer.from(`${jsonl}\n`), "bounded-batch.jsonl"), purpose: "batch" },
          { signal },
        ),
      ),
    options,
  );
  // A create whose answer was lost may have created the batch: only a refusal the provider
  // answered (5xx, 429) is asked again, never a timeout or a dropped connection.
  const batch = await call(
    "create",
    "POST /batches",
    async (client, signal) =>
      client.batches.create(
        {
          input_file_id: file.id,
          endpoint: "/v1/chat/completions",
          completion_window: "24h",
          metadata: metadataOf(options.context),
        },
        { signal },
      ),
    { ...options, answeredOnly: true },
  );
  const state = stateOf(batch);
  log.info(
    { ...options.context, batch: state.id, requests: requests.length, model, status: state.status },
    "batch submitted",
  );
  return state;
}

/** The batch as the provider reports it now. */
export async function getBatch(id: string, options: BatchServiceOptions = {}): Promise<BatchState> {
  return stateOf(
    await call("get", "GET /batches/{id}", (client, signal) => client.batches.retrieve(id, { signal }), options),
  );
}

/** How many of the newest batches `findBatch` reads: one page of OpenAI's list. */
export const FIND_BATCH_PAGE = 100;

/**
 * The newest of the provider's latest `FIND_BATCH_PAGE` batches whose metadata has `key` set to
 * `value` (as `submitBatch` wrote its context), or null. How a job finds a batch it submitted but
 * could not write down (its process stopped, or the create's answer was lost).
 */
export async function findBatch(
  key: string,
  value: string,
  options: BatchServiceOptions = {},
): Promise<BatchState | null> {
  const page = await call(
    "list",
    "GET /batches",
    async (client, signal) => (await client.batches.list({ limit: FIND_BATCH_PAGE }, { signal })).data,
    options,
  );
  const found = page.find((b) => b.metadata?.[key] === value);
  return found ? stateOf(found) : null;
}

/**
 * Asks the provider to stop the batch; it goes `cancelling`, then `cancelled` with the answers
 * done so far. A batch that already ended (or is being cancelled) is answered as it is.
 */
export async function cancelBatch(id: string, options: BatchServiceOptions = {}): Promise<BatchState> {
  try {
    return stateOf(
      await call(
        "cancel",
        "POST /batches/{id}/cancel",
        (client, signal) => client.batches.cancel(id, { signal }),
        options,
      ),
    );
  } catch (err) {
    // OpenAI refuses to cancel a batch that has ended (409, or 400 at some providers): its state is the answer.
    if (err instanceof ModelCallError && (err.status === 409 || err.status === 400)) {
      const state = await getBatch(id, options);
      if (FINISHED_BATCH_STATUSES.includes(state.status) || state.status === "cancelling") return state;
      throw err;
    }
    throw err;
  }
}

/** The answers the batch has (partial after a cancel or an expiry), by custom id; requests that errored are absent. */
export async function batchAnswers(
  state: BatchState,
  options: BatchServiceOptions = {},
): Promise<Map<string, BatchAnswer>> {
  const answers = new Map<string, BatchAnswer>();
  const fileId = state.outputFileId;
  if (!fileId) return answers;
  const text = await call(
    "output",
    "GET /files/{id}/content",
    async (client, signal) => (await client.files.content(fileId, { signal })).text(),
    options,
  );
  let unreadable = 0;
  for (const raw of text.split("\n")) {
    if (raw.trim() === "") continue;
    const line = outputLineSchema.safeParse(safeJson(raw));
    if (!line.success) {
      unreadable++;
      continue;
    }
    const { custom_id: customId, response } = line.data;
    if (response?.status_code !== 200) continue;
    const body = chatCompletionResponseSchema.safeParse(response.body);
    const content = body.success ? body.data.choices[0]!.message.content : null;
    if (!body.success || content === null) {
      unreadable++;
      continue;
    }
    answers.set(customId, {
      content,
      promptTokens: body.data.usage?.prompt_tokens ?? 0,
      completionTokens: body.data.usage?.completion_tokens ?? 0,
    });
  }
  if (unreadable > 0)
    log.warn({ batch: state.id, file: fileId, unreadable }, "batch output lines that are no answer were left out");
  return answers;
}

/**
 * The `fetch` the client sends with, a file upload's form included: the form is encoded to bytes
 * here (with its multipart boundary), as the transport sends string and byte bodies only.
 */
function withFormBodies(send: ModelFetch): ModelFetch {
  return async (input, init = {}) => {
    if (!(init.body instanceof FormData)) return send(input, init);
    const encoded = new Response(init.body);
    const headers = new Headers(init.headers);
    headers.set("content-type", encoded.headers.get("content-type")!);
    return send(input, { ...init, headers, body: new Uint8Array(await encoded.arrayBuffer()) });
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function stateOf(answer: unknown): BatchState {
  const parsed = batchSchema.safeParse(answer);
  if (!parsed.success)
    throw new ModelCallError(`the batch service's answer is not a batch: ${snippet(JSON.stringify(answer) ?? "")}`, {
      status: 200,
      attempts: 1,
      retryable: false,
    });
  const b = parsed.data;
  return {
    id: b.id,
    status: b.status,
    total: b.request_counts?.total ?? 0,
    completed: b.request_counts?.completed ?? 0,
    failed: b.request_counts?.failed ?? 0,
    outputFileId: b.output_file_id ?? null,
    errorFileId: b.error_file_id ?? null,
    createdAt: new Date(b.created_at * 1000),
    expiresAt: b.expires_at ? new Date(b.expires_at * 1000) : null,
  };
}

/** The context as OpenAI keeps metadata: string values, 16 keys at most. */
function metadataOf(context: Record<string, unknown> | undefined): Record<string, string> | undefined {
  if (!context) return undefined;
  const entries = Object.entries(context)
    .filter(([, v]) => v !== undefined && v !== null)
    .slice(0, METADATA_KEYS)
    .map(([k, v]) => [k.slice(0, 64), (typeof v === "string" ? v : JSON.stringify(v)).slice(0, 512)]);
  return entries.length > 0 ? Object.fromEntries(entries) : undefined;
}

type Attempt<T> =
  | { ok: true; value: T }
  | {
      ok: false;
      message: string;
      status?: number;
      retryable: boolean;
      /** Whether the service answered (an HTTP status): only those are retried for `answeredOnly`. */
      answered: boolean;
      retryAfterMs?: number;
      cause?: unknown;
    };

/** Backoff before retry n: 250–500 ms, then 500–1000 ms… (scaled), as the sync calls. */
const BACKOFF_BASE_MS = 250;

/**
 * One operation of the batch service: attempts through the model's breaker, each with its time
 * limit, transient failures retried.
 */
async function call<T>(
  operation: string,
  path: string,
  send: (client: OpenAI, signal: AbortSignal) => Promise<T>,
  options: BatchServiceOptions & { answeredOnly?: boolean },
): Promise<T> {
  const { signal } = options;
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const maxRetries = options.maxRetries ?? 2;
  const timeoutMs = Math.max(
    MIN_REQUEST_TIMEOUT_REAL_MS,
    scaled(options.requestTimeoutMs ?? BATCH_REQUEST_TIMEOUT_MS, timeScale),
  );
  const client = modelClient({ ...options, fetch: withFormBodies(options.fetch ?? nodeFetch) });
  const base = new URL(client.baseURL);
  // Origin and path only: credentials or a query in the base URL never reach the breaker or the logs.
  const target = `${path.split(" ")[0]} ${base.origin}${base.pathname.replace(/\/+$/, "")}${path.split(" ")[1]}`;

  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    const result = await guardCall(
      "model",
      async (): Promise<Attempt<T>> => {
        const timeout = AbortSignal.timeout(timeoutMs);
        try {
          const value = await sendTracked(
            target,
            (outage) => withLinkedSignal([timeout, signal, outage], (linked) => send(client, linked)),
            (outcome) =>
              "value" in outcome || (outcome.error instanceof APIError && outcome.error.status !== undefined),
          );
          return { ok: true, value };
        } catch (err) {
          return failedAttempt(err, signal, timeout, timeoutMs);
        }
      },
      // A 404 is about the batch or file asked for, or about a service without a batch API: the
      // service answered, and the sync calls need not stop for it.
      { signal, failureOf: (r) => (r.ok || r.status === 404 ? undefined : r) },
    );
    if (result.ok) return result.value;
    if (signal?.aborted) throw signal.reason;
    const retry =
      result.retryable &&
      attempt <= maxRetries &&
      (result.answered || !options.answeredOnly) &&
      (result.retryAfterMs === undefined || result.retryAfterMs <= scaled(5_000, timeScale));
    if (!retry)
      throw new ModelCallError(`batch service ${operation} failed after ${attempt} attempt(s): ${result.message}`, {
        status: result.status,
        attempts: attempt,
        retryable: result.retryable,
        retryAfterMs: result.retryAfterMs,
        cause: result.cause,
      });
    const waitMs = Math.max(backoffMs(BACKOFF_BASE_MS, attempt, timeScale), result.retryAfterMs ?? 0);
    log.warn(
      { operation, attempt, status: result.status, waitMs, error: result.message },
      "batch service call failed, retrying",
    );
    await sleep(waitMs, signal);
  }
}

function failedAttempt<T>(
  err: unknown,
  signal: AbortSignal | undefined,
  timeout: AbortSignal,
  timeoutMs: number,
): Attempt<T> {
  if (signal?.aborted)
    return {
      ok: false,
      message: `aborted: ${describeError(signal.reason)}`,
      retryable: false,
      answered: false,
      cause: signal.reason,
    };
  if (timeout.aborted || err instanceof APIConnectionTimeoutError)
    return { ok: false, message: `no answer within ${timeoutMs} ms`, retryable: true, answered: false, cause: err };
  if (err instanceof APIConnectionError || err instanceof APIUserAbortError)
    return {
      ok: false,
      message: `network error: ${describeError(err.cause ?? err)}`,
      retryable: true,
      answered: false,
      cause: err.cause ?? err,
    };
  if (err instanceof APIError && err.status !== undefined) {
    const body = err.error as { message?: unknown } | undefined;
    const words = typeof body?.message === "string" && body.message ? body.message : snippet(err.message);
    const headers = err.headers;
    return {
      ok: false,
      status: err.status,
      message: `HTTP ${err.status}: ${words}`,
      retryable: classifyStatus(err.status) !== "rejected",
      answered: true,
      retryAfterMs: headers ? retryAfterMs({ header: (name) => headers.get(name) ?? undefined }) : undefined,
      cause: err,
    };
  }
  if (err instanceof z.ZodError)
    return {
      ok: false,
      status: 200,
      message: `the answer is not what was asked for: ${err.issues[0]?.message}`,
      retryable: false,
      answered: true,
      cause: err,
    };
  return { ok: false, message: `network error: ${describeError(err)}`, retryable: true, answered: false, cause: err };
}
