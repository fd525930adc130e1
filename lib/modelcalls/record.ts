import { db } from "@/lib/db/client";
import { logger } from "@/lib/log";

const log = logger("modelcalls");

/** Where a model call was made from; all optional because calls outside a job exist too. */
export interface ModelCallContext {
  queue?: string;
  jobKind?: string;
  /** The Job row's id (a foreign key: pass only ids of existing jobs). */
  jobId?: string;
}

export type ModelCallOutcome = "ok" | "error" | "aborted";

/** One HTTP attempt against the model endpoint, as the latency histograms read it. */
export interface ModelCallRecord extends ModelCallContext {
  model: string;
  startedAt: Date;
  durationMs: number;
  outcome: ModelCallOutcome;
  error?: string;
}

export type RecordModelCall = (call: ModelCallRecord) => Promise<void>;

/** Longer messages (an HTML error page from a proxy) are cut: the row is for triage, not forensics. */
const MAX_ERROR_LENGTH = 1_000;

const pending = new Set<Promise<void>>();

/**
 * Writes one ModelCall row. Never rejects: a failed write is logged and the model call's result
 * stands, because losing a histogram sample must not fail an import row.
 */
export function recordModelCall(call: ModelCallRecord): Promise<void> {
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
        startedAt: call.startedAt,
        durationMs: Math.max(0, Math.round(call.durationMs)),
        outcome: call.outcome,
        error: call.error?.slice(0, MAX_ERROR_LENGTH) ?? null,
      },
      select: { id: true },
    });
  } catch (err) {
    log.warn({ err, call }, "could not record a model call");
  }
}
