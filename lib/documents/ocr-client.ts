import { env } from "@/lib/env";
import { describeError, snippet } from "@/lib/format/describe";
import { attemptRequest, backoffMs, describeFailure } from "@/lib/http/outbound";
import { logger } from "@/lib/log";
import {
  abortedCall,
  recordInBackground,
  recordModelCall,
  type ModelCallContext,
  type ModelCallRecord,
  type RecordModelCall,
} from "@/lib/modelcalls/record";
import { withProviderSlot } from "@/lib/ratelimit/provider";
import { sleep } from "@/lib/time";
import { storableText } from "@/lib/db/storable";
import { ocrBaseUrl } from "./settings";

const log = logger("documents.ocr");

/** What the OCR service made of a document. */
export interface OcrResult {
  text: string;
  pages: number;
  /** What the caller waited in all: every attempt and the backoff between them. */
  durationMs: number;
  /** HTTP attempts made (1 when the first one answered). */
  attempts: number;
}

/**
 * OCR failed for good: the document cannot be read (4xx, not retryable) or the service kept
 * failing. An item failure for the caller, never a control signal: an aborted call rejects with
 * the signal's reason instead.
 */
export class OcrError extends Error {
  override name = "OcrError";
  constructor(
    message: string,
    readonly details: { status?: number; attempts: number; retryable: boolean; cause?: unknown },
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
  }
}

export interface OcrOptions {
  /** The document's bytes, sent as the request body. */
  bytes: Uint8Array;
  /** @defaultValue "application/octet-stream" (the service reads the bytes, not the header) */
  contentType?: string;
  /**
   * The job's signal: an in-flight OCR call is aborted at the deadline and rejects with
   * `signal.reason`, unchanged.
   */
  signal: AbortSignal;
  /** Where the call comes from, written to every ModelCall row (type "ocr"). */
  context: ModelCallContext;
  /** Further attempts after a transient failure (5xx, 429, network error). @defaultValue 2 */
  maxRetries?: number;
  /** @defaultValue `ocrBaseUrl()` (OCR_BASE_URL, else the bundled simulators) */
  baseUrl?: string;
  /** The name written to the ModelCall rows' `model` column. @defaultValue "ocr" */
  engine?: string;
  /** Scale of the retry backoff. @defaultValue `env().BOUNDED_TIME_SCALE` */
  timeScale?: number;
  /** @defaultValue `recordModelCall` */
  record?: RecordModelCall;
}

/** Backoff before retry n (1-based): 500–1000 ms, then 1–2 s (scaled), jittered. */
const BACKOFF_BASE_MS = 500;

type Attempt =
  | { ok: true; text: string; pages: number }
  | { ok: false; message: string; status?: number; retryable: boolean; cause?: unknown };

/**
 * Sends one document to the OCR service (`POST {baseUrl}/ocr`, the bytes as the body) and
 * returns its `{ text, pages }`. Transient failures are retried; each HTTP attempt is recorded as
 * a ModelCall row of type "ocr". No per-request time limit: the caller's signal is the only one
 * (as for model calls).
 */
export async function ocrDocument(options: OcrOptions): Promise<OcrResult> {
  const { bytes, signal, context } = options;
  const maxRetries = options.maxRetries ?? 2;
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const record = options.record ?? recordModelCall;
  const engine = options.engine ?? "ocr";
  const url = new URL(`${(options.baseUrl ?? ocrBaseUrl()).replace(/\/+$/, "")}/ocr`);
  const contentType = options.contentType ?? "application/octet-stream";

  const callStarted = performance.now();
  for (let attempt = 1; ; attempt++) {
    signal.throwIfAborted();
    // One provider slot per attempt, released before the backoff; the row times the attempt only
    // and is recorded inside the slot, so that the attempt whose failure opens the provider's
    // circuit breaker (which then ends the call with `OutsideServiceDown`) is recorded too.
    const result = await withProviderSlot(
      "ocr",
      async () => {
        const startedAt = new Date();
        const attemptStarted = performance.now();
        const result = await attemptOnce(url, bytes, contentType, signal);
        const row: ModelCallRecord = {
          ...context,
          type: "ocr",
          model: engine,
          startedAt,
          durationMs: performance.now() - attemptStarted,
          outcome: "ok",
        };
        if (result.ok) recordInBackground(record, row, "an OCR call");
        else if (signal.aborted) recordInBackground(record, { ...row, ...abortedCall(signal.reason) }, "an OCR call");
        else recordInBackground(record, { ...row, outcome: "error", error: result.message }, "an OCR call");
        return result;
      },
      // The provider's circuit breaker reads each attempt's failure (lib/ratelimit/breaker.ts).
      { signal, failureOf: (result) => (result.ok ? undefined : result) },
    );

    if (result.ok)
      return {
        text: result.text,
        pages: result.pages,
        durationMs: Math.round(performance.now() - callStarted),
        attempts: attempt,
      };
    // An aborted signal is the reason whatever the attempt failed with; never wrapped.
    if (signal.aborted) throw signal.reason;
    if (!result.retryable || attempt > maxRetries) {
      throw new OcrError(result.message, {
        status: result.status,
        attempts: attempt,
        retryable: result.retryable,
        cause: result.cause,
      });
    }
    const waitMs = backoffMs(BACKOFF_BASE_MS, attempt, timeScale);
    log.warn(
      { ...context, attempt, status: result.status, waitMs, error: result.message },
      "OCR call failed, retrying",
    );
    await sleep(waitMs, signal);
  }
}

const SERVICE = "the OCR service";

async function attemptOnce(url: URL, bytes: Uint8Array, contentType: string, signal: AbortSignal): Promise<Attempt> {
  const attempt = await attemptRequest({
    method: "POST",
    url,
    body: bytes,
    headers: { "content-type": contentType, accept: "application/json" },
    signal,
  });
  if (!attempt.ok) {
    // An aborted attempt: the caller rethrows the signal's reason; the message is never read.
    if (attempt.kind === "aborted") return { ok: false, message: describeError(attempt.reason), retryable: false };
    const status = "status" in attempt ? attempt.status : undefined;
    const cause = "cause" in attempt ? attempt.cause : undefined;
    return { ok: false, status, message: describeFailure(SERVICE, attempt), retryable: attempt.retryable, cause };
  }
  const { status, body } = attempt.response;
  try {
    const json = JSON.parse(body) as { text?: unknown; pages?: unknown };
    // The text is stored as read: whatever the database cannot hold (NUL, a lone surrogate) is dropped or replaced first.
    if (typeof json.text === "string" && Number.isInteger(json.pages))
      return { ok: true, text: storableText(json.text), pages: json.pages as number };
  } catch {
    // handled below
  }
  return {
    ok: false,
    status,
    message: `${SERVICE} answered something other than { text, pages }: ${snippet(body)}`,
    retryable: false,
  };
}
