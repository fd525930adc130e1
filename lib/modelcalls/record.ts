import { db } from "@/lib/db/client";
import { CallSuperseded } from "./errors";
import type { CallOutcome } from "@/lib/core/call-outcomes";
import { isDeadlineExceeded } from "@/lib/core/signals";
import { describeError } from "@/lib/format/describe";
import { logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";

const log = logger("modelcalls");

/** Where a model call was made from; all optional because calls outside a job exist too. */
export interface ModelCallContext {
  queue?: string;
  jobKind?: string;
  /** The Job row's id (a foreign key: pass only ids of existing jobs). */
  jobId?: string;
  /**
   * How many items the call answers: the rows of a batched prompt, 1 for a single-item call.
   * Carried in the context so that every attempt of the call is recorded with it, and a batch's
   * latency can be told from a single call's. Never a metric label: the histogram's series would
   * multiply by every size in use. @defaultValue 1
   */
  batchSize?: number;
}

/**
 * What was called: a model, a deterministic tool (inside an agent run), an OCR service, or a
 * batch at the model provider's Batch API (one record per batch, its answered rows' tokens).
 */
export type ModelCallType = "model" | "tool" | "ocr" | "batch";

/** How a model was asked: directly (a chat completion) or through its Batch API, each at its own price. */
export type ModelCallLane = "sync" | "batch";

/**
 * One timed call, as the latency histograms read it: an HTTP attempt against the model
 * endpoint, one tool invocation, or one OCR attempt.
 */
export interface ModelCallRecord extends ModelCallContext {
  /** @defaultValue "model" */
  type?: ModelCallType;
  /** @defaultValue "sync" */
  lane?: ModelCallLane;
  /** The model's name; for a tool call the tool's name, for an OCR call the OCR engine's. */
  model: string;
  startedAt: Date;
  durationMs: number;
  outcome: CallOutcome;
  error?: string;
  /** An `aborted` call cut by its job's soft limit (`DeadlineExceeded`), not by a cancel or a hand-over. */
  cutByDeadline?: boolean;
  /** The answer's tokens as the endpoint counted them (`usage`); only a model call that got one has them. */
  promptTokens?: number;
  completionTokens?: number;
}

export type RecordModelCall = (call: ModelCallRecord) => Promise<void>;

/**
 * What a cut call records: `aborted`, why, and whether the job's deadline cut it — or `superseded`
 * when it was cancelled because the same question was answered elsewhere first.
 */
export function abortedCall(reason: unknown): Pick<ModelCallRecord, "outcome" | "error" | "cutByDeadline"> {
  if (reason instanceof CallSuperseded) return { outcome: "superseded", error: reason.message, cutByDeadline: false };
  return { outcome: "aborted", error: describeError(reason), cutByDeadline: isDeadlineExceeded(reason) };
}

/** Longer messages (an HTML error page from a proxy) are cut: the row is for triage, not forensics. */
const MAX_ERROR_LENGTH = 1_000;

const pending = new Set<Promise<void>>();

/**
 * Writes one ModelCall row. Never rejects: a failed write is logged and the model call's result
 * stands, because losing a histogram sample must not fail an import row.
 */
export function recordModelCall(call: ModelCallRecord): Promise<void> {
  // Observed before the write, so the Prometheus metrics count the call even when the row is lost.
  // A batch's hours of turnaround are no call latency: it is counted in tokens only.
  const { type = "model" } = call;
  if (type !== "batch") metrics.observeModelCall({ ...call, type });
  countTokens(call);
  const write: Promise<void> = insert(call).finally(() => pending.delete(write));
  pending.add(write);
  return write;
}

/**
 * Resolves when every recording started so far has finished. The model client does not wait for
 * its recordings (a slow database should not slow model calls); shutdown and tests wait here.
 */
export async function flushModelCallRecords(): Promise<void> {
  await Promise.all([...pending]);
}

async function insert(call: ModelCallRecord): Promise<void> {
  try {
    await db().modelCall.create({
      data: {
        queue: call.queue ?? null,
        jobKind: call.jobKind ?? null,
        jobId: call.jobId ?? null,
        model: call.model,
        type: call.type ?? "model",
        lane: call.lane ?? "sync",
        startedAt: call.startedAt,
        durationMs: Math.max(0, Math.round(call.durationMs)),
        outcome: call.outcome,
        error: call.error?.slice(0, MAX_ERROR_LENGTH) ?? null,
        // A call outside a batch is a batch of one.
        batchSize: call.batchSize ?? 1,
        promptTokens: tokens(call.promptTokens),
        completionTokens: tokens(call.completionTokens),
      },
      select: { id: true },
    });
  } catch (err) {
    log.warn({ err, call }, "could not record a model call");
  }
}

/** A token count fit for the column and the counter: a whole number ≥ 0, else unknown. */
function tokens(value: number | undefined): number | null {
  return value !== undefined && Number.isSafeInteger(value) && value >= 0 ? value : null;
}

/** `bounded_model_tokens_total{kind,type}`, by the call's job kind ("" outside a job). */
function countTokens(call: ModelCallRecord): void {
  const kind = call.jobKind ?? "";
  const prompt = tokens(call.promptTokens);
  const completion = tokens(call.completionTokens);
  if (prompt) metrics.modelTokens.inc({ kind, type: "prompt" }, prompt);
  if (completion) metrics.modelTokens.inc({ kind, type: "completion" }, completion);
}

/**
 * Records a call without awaiting it: a slow database must not slow the call. `recordModelCall`
 * never rejects; the guard is for injected recorders.
 */
export function recordInBackground(record: RecordModelCall, call: ModelCallRecord, what: string): void {
  const warn = (err: unknown) => log.warn({ err }, `could not record ${what}`);
  try {
    record(call).catch(warn);
  } catch (err) {
    warn(err);
  }
}
