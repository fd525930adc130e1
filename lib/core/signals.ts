/**
 * Control signals and expected job failures. Control signals end a run (or hand it back to the
 * queue); they are never an item's failure. They are recognised by `name`, which survives
 * worker threads and module duplication where `instanceof` may not.
 */

import { formatSeconds } from "@/lib/format/duration";

/** The job's soft limit passed: its AbortSignal aborts with this reason. */
export class DeadlineExceeded extends Error {
  override name = "DeadlineExceeded";
  constructor(
    readonly jobId: string,
    readonly budgetMs: number,
  ) {
    super(`job ${jobId}: soft limit of ${formatSeconds(budgetMs)} reached`);
  }
}

/**
 * A run tried to write for an attempt that is no longer the job's current one (a newer attempt
 * started, or the job was finalized). The write was refused; the run must stop.
 */
export class AttemptFenced extends Error {
  override name = "AttemptFenced";
  constructor(
    readonly jobId: string,
    readonly attempt: number,
  ) {
    super(`job ${jobId}: attempt ${attempt} is no longer current; write refused`);
  }
}

/** The worker process is stopping; the run is handed back to the queue and resumes elsewhere. */
export class WorkerShutdown extends Error {
  override name = "WorkerShutdown";
}

/**
 * A run reached the end of its slice with items left (the provider was busier than its projection
 * assumed): it sent nothing new, let the items in flight commit, and hands the rest to a new
 * attempt with a fresh budget, in its tenant's place in the queue — rather than run into its
 * deadline. Thrown by `forEachItem` once the items in flight are committed.
 */
export class SliceEnded extends Error {
  override name = "SliceEnded";
  constructor(readonly committedThisRun: number) {
    super(`slice ended after ${committedThisRun} items; the rest continues in a new attempt`);
  }
}

/**
 * An operator cancelled the running job (lib/actions/cancel.ts): its signal aborts with this reason.
 * The row is already `cancelled` with its committed progress when the signal propagates; nothing
 * new is dispatched, items in flight end, and a retry resumes at the cursor.
 */
export class JobCancelled extends Error {
  override name = "JobCancelled";
  constructor(
    readonly jobId: string,
    readonly by: string,
  ) {
    super(`job ${jobId}: cancelled by ${by}`);
  }
}

/**
 * A control signal, never an item failure: the job's rows are with the provider's batch service
 * (lib/runs/batch-lane.ts) and the answers are not in yet. The run gives its worker slot back —
 * the reschedule policy's deferral, without spending an attempt — until `waitMs` from now (real
 * ms: its next look at the batch, never past its last moment to finish directly).
 */
export class BatchPending extends Error {
  override name = "BatchPending";
  constructor(
    /** Real milliseconds (already time-scaled) until the run looks at the batch again. */
    readonly waitMs: number,
    /** The provider's batch id. */
    readonly batchId: string,
    /** When the lane's turnaround says it should be done, and the last moment to stop waiting. */
    readonly expectedBy: Date,
    readonly lastMomentAt: Date,
  ) {
    super(`batch ${batchId} not done yet; looking again in ${formatSeconds(waitMs)}`);
  }
}

export function isDeadlineExceeded(err: unknown): err is DeadlineExceeded {
  return err instanceof Error && err.name === "DeadlineExceeded";
}

export function isBatchPending(err: unknown): err is BatchPending {
  return err instanceof Error && err.name === "BatchPending";
}

const CONTROL_SIGNALS = new Set([
  "BatchPending",
  "DeadlineExceeded",
  "AttemptFenced",
  "WorkerShutdown",
  "RateLimitDefer",
  "DelayedError",
  "SliceEnded",
  "JobCancelled",
  "OutsideServiceDown",
]);

export function isControlSignal(err: unknown): err is Error {
  return err instanceof Error && CONTROL_SIGNALS.has(err.name);
}

/** One item cannot be processed; the message is what a person reads next to the item's number. */
export class ItemError extends Error {
  override name = "ItemError";
}

/** The whole job cannot go on (e.g. its input is gone); the message is what a person reads. */
export class JobFailed extends Error {
  override name = "JobFailed";
}
