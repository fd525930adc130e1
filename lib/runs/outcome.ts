import { DelayedError, UnrecoverableError, type Job as QueueJob } from "bullmq";
import { cancelOpenBatch } from "./batch-lane";
import { cancelAnnounced, finalizeCancelled, type CancelAsk } from "./cancel-request";
import { DeadlineExceeded, type SliceEnded } from "@/lib/core/signals";
import { completedMessage, killedMessage, timedOutMessage } from "@/lib/jobs/messages";
import type { RunStart } from "./attempt";
import { finalizeJob, finalizeJobRow, handBack, handOver } from "./finalize";
import { mirrorProgress } from "./queue-job";
import type { Logger } from "@/lib/log";
import type { DeferSignal } from "./deferral";
import { deferRun } from "./reschedule";
import type { RunResult } from "./processor";

/**
 * How a run ended — exactly one of these. The deadline decides which (./deadline.ts, ./classify.ts);
 * `settleRun` below is the one place that maps it to the row, the metrics (through
 * `finalizeJob`), the log line and what BullMQ is told.
 */
export type RunOutcome =
  /** The processor returned: `completed`, or `completed_with_errors` when an item failed. */
  | { type: "completed"; result: RunResult }
  /** The soft limit passed (the row is normally already `timed_out`: it is written before the abort). */
  | { type: "timed_out" }
  /** The hard limit passed with the processor still running: abandoned and fenced. */
  | { type: "killed" }
  /** The limiter's wait is longer than the threshold, an outside service is down, or its batch is not done yet: the run gives its slot back. */
  | { type: "deferred"; defer: DeferSignal }
  /** The worker process is stopping: the run goes back to the queue at its cursor. */
  | { type: "handed_back"; error: unknown }
  /** The run's slice ended with items left: the rest goes back to the queue for a fresh attempt. */
  | { type: "sliced"; ended: SliceEnded }
  /** An operator cancelled it (the row is normally already `cancelled`: it is written before the abort). */
  | { type: "cancelled"; ask: CancelAsk }
  /** Another attempt or a finalizer owns the row: nothing is written. */
  | { type: "fenced" }
  /** The job cannot go on: `message` is what a person reads, `reason` the queue job's failed reason. */
  | { type: "failed"; message: string; reason: string; error?: unknown };

/**
 * What BullMQ is told: the queue job completed, failed for good (never blindly retried: a retry
 * resumes at the cursor when someone decides it), or went back to *delayed* without spending an
 * attempt (already moved, with the lock token) — or, without a token, the control signal is the
 * caller's to handle.
 */
export type QueueResult =
  | { type: "completed" }
  | { type: "failed"; reason: string }
  | { type: "delayed" }
  | { type: "rethrow"; error: unknown };

export interface Settlement {
  run: RunStart;
  attemptStart: Date;
  outcome: RunOutcome;
  log: Logger;
  queueJob: QueueJob;
  token: string | undefined;
  /** Aborts the run's signal (a killed run's processor, which may still be going). */
  abort(reason: unknown): void;
}

/** Settles a run's outcome (row, metrics, log) and gives BullMQ its result: returns, or throws as BullMQ expects. */
export async function settleRun(s: Settlement): Promise<void> {
  const result = await settleOutcome(s);
  switch (result.type) {
    case "completed":
      return;
    case "failed":
      throw new UnrecoverableError(result.reason);
    case "delayed":
      throw new DelayedError();
    case "rethrow":
      throw result.error;
  }
}

/** The row, the metrics and the log line of each outcome, and the queue result it implies. */
async function settleOutcome({
  run,
  attemptStart,
  outcome,
  log,
  queueJob,
  token,
  abort,
}: Settlement): Promise<QueueResult> {
  const { jobId, attempt } = run;
  switch (outcome.type) {
    case "completed":
      return settleCompleted(run, outcome.result, log, queueJob);
    case "timed_out":
      // Normally already finalized by the soft timer; this covers a processor that ended first.
      await finalizeJob(jobId, attempt, {
        status: "timed_out",
        message: timedOutMessage,
        from: ["running"],
        known: run,
      });
      return { type: "failed", reason: "soft limit reached" };
    case "killed":
      // Its row is closed and fenced; the slot is freed now, and whatever it still does cannot commit.
      await finalizeJob(jobId, attempt, {
        status: "killed",
        message: (row) => killedMessage(row, "ignored_signal"),
        from: ["running", "timed_out"],
        known: run,
      });
      abort(new DeadlineExceeded(jobId, run.budgetSoftMs));
      log.error({ hardMs: run.budgetHardMs }, "hard limit reached: run abandoned and fenced");
      return { type: "failed", reason: "hard limit reached" };
    case "deferred": {
      // A cancel asked while the run was about to wait (its last look answered before the poll
      // saw the request) ends it now, not at its next start: its batch would run on meanwhile.
      const asked = await cancelAnnounced(jobId, attempt);
      if (asked) return settleCancelled(run, asked, log);
      return settleDeferred(run, attemptStart, outcome.defer, log, queueJob, token);
    }
    case "handed_back":
      // The row goes back to queued (only if this attempt still owns it); the queue job goes back
      // to the queue at once without spending an attempt, so another worker resumes at the cursor.
      await handBack(jobId, attempt);
      return backToQueueNow(queueJob, token, outcome.error);
    case "sliced":
      // As a hand-back, but the row says why; the queue job keeps its place in its tenant's line.
      await handOver(jobId, attempt, outcome.ended.committedThisRun, run.kind);
      log.info(
        { committed: outcome.ended.committedThisRun },
        "slice ended with items left: the rest continues in a new attempt",
      );
      return backToQueueNow(queueJob, token, outcome.ended);
    case "cancelled":
      return settleCancelled(run, outcome.ask, log);
    case "fenced":
      log.warn("attempt fenced: the row is no longer this run's; stopping");
      return { type: "completed" };
    case "failed":
      if (outcome.error !== undefined) log.error({ err: outcome.error }, "run failed");
      await finalizeJob(jobId, attempt, { status: "failed", message: outcome.message });
      return { type: "failed", reason: outcome.reason };
  }
}

/** A run an operator cancelled: `cancelled` with who asked, and its open batch at the provider cancelled too. */
async function settleCancelled(run: RunStart, ask: CancelAsk, log: Logger): Promise<QueueResult> {
  // Normally already finalized before the abort; this covers a database that did not answer in
  // time, and a run that was about to wait when it saw the request.
  await finalizeCancelled(run, ask);
  log.info({ by: ask.by }, "run cancelled by an operator");
  // Cancelled while it looked at its batch: the batch goes too (a no-op for any other run).
  await cancelOpenBatch(run.jobId, log);
  return { type: "failed", reason: `cancelled by ${ask.by}` };
}

/** A run that completed: `completed`, or `completed_with_errors` when an item failed. */
async function settleCompleted(
  run: RunStart,
  result: RunResult,
  log: Logger,
  queueJob: QueueJob,
): Promise<QueueResult> {
  const finalized = await finalizeJobRow(run.jobId, run.attempt, {
    // Completed with item failures is its own status, decided from the committed counts.
    status: "completed",
    message: result.message ?? completedMessage,
    from: ["running"],
    result: result.result,
    // A run whose counts are still those it started with finishes in one statement; otherwise in two.
    known: run,
  });
  if (!finalized) log.warn("run finished but the row was no longer this attempt's (reaped or superseded)");
  else {
    log.info("run finished");
    // The final counts as the finish wrote them: no read. Not awaited (best effort).
    void mirrorProgress(queueJob, run.jobId, finalized);
  }
  return { type: "completed" };
}

/** A run that gives its slot back until its wait ends (./reschedule.ts), or ends past its kind's maximum age. */
async function settleDeferred(
  run: RunStart,
  attemptStart: Date,
  defer: DeferSignal,
  log: Logger,
  queueJob: QueueJob,
  token: string | undefined,
): Promise<QueueResult> {
  const deferred = await deferRun(run, attemptStart, defer, log, queueJob, token);
  if (deferred === "timed_out") return { type: "failed", reason: "maximum age reached" };
  if (deferred === "fenced") return { type: "completed" };
  // Without a lock token the queue job could not be moved: it is the caller's.
  return token === undefined ? { type: "rethrow", error: defer } : { type: "delayed" };
}

/** The queue job goes back to the queue at once without spending an attempt; without a lock token, `error` is the caller's. */
async function backToQueueNow(queueJob: QueueJob, token: string | undefined, error: unknown): Promise<QueueResult> {
  if (token === undefined) return { type: "rethrow", error };
  await queueJob.moveToDelayed(Date.now(), token);
  return { type: "delayed" };
}
