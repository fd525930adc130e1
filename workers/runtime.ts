import { UnrecoverableError, type Job as QueueJob } from "bullmq";
import { resolveBudget } from "@/lib/budgets/budgets";
import type { Prisma } from "@/lib/db/client";
import { DeadlineExceeded, JobFailed } from "@/lib/jobs/errors";
import type { ItemLoop } from "@/lib/jobs/for-each-item";
import { partOf } from "@/lib/jobs/parts";
import { countLabel, finalizeJob, fmtSeconds, handBack, heartbeat, nounOf, progressPhrase, startAttempt, type FinalRow, type RunStart } from "@/lib/jobs/run";
import { heartbeatIntervalMs } from "@/lib/jobs/stuck";
import { jobPayloadSchema, KINDS, type JobKind } from "@/lib/queues/catalog";
import type { Logger } from "@/lib/log";
import { scaled } from "@/lib/time";
import { rescheduleRun } from "./reschedule";

export interface RunContext {
  run: RunStart;
  /**
   * Aborts at the soft limit (reason: `DeadlineExceeded`) or when the worker stops (reason:
   * `WorkerShutdown`). Pass it to everything awaited.
   */
  signal: AbortSignal;
  log: Logger;
  queueJob: QueueJob;
  /** Ready-made for `forEachItem`: this attempt, its cursor and signal. */
  loop: ItemLoop;
}

export interface RunResult {
  /** The terminal message; built from the committed row counts when a function. */
  message?: string | ((row: FinalRow) => string);
  /** What the job produced, kept on the row. */
  result?: Prisma.InputJsonValue;
}

export type Processor = (ctx: RunContext) => Promise<RunResult | void>;

/** Lets a watchdog outside the event loop enforce the hard limit on a processor that blocks it. */
export interface HardLimitWatch {
  start(run: { jobId: string; attempt: number; hardAt: number; kind: string }): void;
  end(jobId: string): void;
}

/** Real time a run always gets between its soft and hard limit, whatever the time scale. */
export const MIN_WIND_DOWN_MS = 1_000;
/** How long the soft limit waits for the row to be finalized before aborting anyway. */
const SOFT_FINALIZE_WAIT_MS = 2_000;
const MAX_TIMER_MS = 2 ** 31 - 1;

function defaultMessage(row: FinalRow): string {
  const noun = nounOf(row.kind);
  const done = row.processed + row.failed;
  if (row.failed === 0) return `Processed all ${countLabel(done, noun)}.`;
  return `Processed ${row.processed.toLocaleString("en-US")} of ${countLabel(done, noun)}; ${countLabel(row.failed, noun)} failed (see the list).`;
}

function timedOutMessage(row: FinalRow): string {
  const advice = KINDS[row.kind as JobKind]?.advice ?? "";
  return `Timed out after ${progressPhrase(row)} (budget ${fmtSeconds(row.budgetSoftMs)}). ${advice}`.trim();
}

function killedMessage(row: FinalRow): string {
  return `Stopped at the hard limit after ${progressPhrase(row)} (hard limit ${fmtSeconds(row.budgetHardMs)}): the job did not stop at its soft limit of ${fmtSeconds(row.budgetSoftMs)}. Nothing it does from now on is saved.`;
}

/**
 * Runs one queue job against its Job row under the deadline policy:
 * - the attempt starts fenced, with the budget this worker resolves (recorded on the row);
 * - at the soft limit the row is finalized `timed_out` first, then the job's signal aborts with
 *   `DeadlineExceeded`;
 * - at the hard limit a processor that has not settled is abandoned: the row becomes `killed`,
 *   its later writes are refused (fencing), and the worker slot is freed;
 * - whatever else happens, the row ends in a terminal state a person can read, and the queue job
 *   fails without blind retries.
 */
export async function runJob(
  processors: Record<string, Processor>,
  queueJob: QueueJob,
  shutdown: AbortSignal,
  log: Logger,
  watch?: HardLimitWatch,
): Promise<void> {
  const { jobId } = jobPayloadSchema.parse(queueJob.data);
  const attemptStart = new Date();
  const run = await startAttempt(jobId, attemptStart, resolveBudget);
  if (!run) {
    log.info({ jobId }, "job is terminal or gone; nothing to run");
    return;
  }
  const { attempt } = run;
  const jobLog = log.child({ jobId, kind: run.kind, attempt });
  const processor = processors[run.kind];
  if (!processor) {
    await finalizeJob(jobId, attempt, { status: "failed", message: `No worker knows the job kind “${run.kind}”.` });
    throw new UnrecoverableError(`unknown kind ${run.kind}`);
  }

  // One controller per run; the process-wide shutdown signal feeds it through a listener that is
  // removed when the run ends (AbortSignal.any on a long-lived signal retains every run).
  const deadline = new AbortController();
  const onShutdown = () => deadline.abort(shutdown.reason);
  if (shutdown.aborted) onShutdown();
  else shutdown.addEventListener("abort", onShutdown, { once: true });
  const signal = deadline.signal;
  const softMs = scaled(run.budgetSoftMs);
  // At small time scales the gap between the limits can be shorter than one database call (which
  // takes no signal): a run that honours its signal still needs that long to wind down.
  const hardMs = Math.max(scaled(run.budgetHardMs), softMs + MIN_WIND_DOWN_MS);
  // Limits count from the moment recorded on the row as the attempt's start. Node runs a timer
  // longer than 2^31−1 ms at once, so long limits are re-armed in steps.
  // A run resumed after a rate-limit wait carries over the slot time its earlier runs used: the
  // budget counts time in a slot, not time spent waiting in delayed.
  const startedAt = attemptStart.getTime() - scaled(run.slotMsUsed);
  const at = (ms: number, fn: () => void): { clear(): void } => {
    let timer: NodeJS.Timeout;
    const arm = () => {
      const left = startedAt + ms - Date.now();
      timer = left > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS) : setTimeout(fn, Math.max(0, left));
    };
    arm();
    return { clear: () => clearTimeout(timer) };
  };

  // Soft limit: the row is finalized before the signal propagates, so what a person sees never
  // depends on how the processor reacts to the abort — unless the database does not answer in
  // time, in which case the abort goes ahead and the error path finalizes.
  let softFired: Promise<void> | undefined;
  const softTimer = at(softMs, () => {
    softFired = (async () => {
      const finalizing = finalizeJob(jobId, attempt, { status: "timed_out", message: timedOutMessage, from: ["running"], known: run }).catch((err) => {
        jobLog.error({ err }, "could not finalize the timed-out row");
        return null;
      });
      const finalized = await Promise.race([finalizing, new Promise<null>((r) => setTimeout(() => r(null), SOFT_FINALIZE_WAIT_MS).unref())]);
      if (finalized) jobLog.warn({ softMs: run.budgetSoftMs }, "soft limit reached: job timed out");
      deadline.abort(new DeadlineExceeded(jobId, run.budgetSoftMs));
    })();
  });
  let hardTimer: { clear(): void } | undefined;
  const hard = new Promise<{ type: "hard" }>((resolve) => {
    hardTimer = at(hardMs, () => resolve({ type: "hard" }));
  });
  const beat = setInterval(() => void heartbeat(jobId, attempt).catch(() => undefined), heartbeatIntervalMs());
  watch?.start({ jobId, attempt, hardAt: startedAt + hardMs, kind: run.kind });

  let outcome: { type: "hard" } | { type: "done"; result: RunResult } | { type: "error"; error: unknown };
  let work: Promise<{ type: "done"; result: RunResult } | { type: "error"; error: unknown }>;
  try {
    const ctx: RunContext = { run, signal, log: jobLog, queueJob, loop: { jobId, attempt, kind: run.kind, cursor: run.cursor, signal, log: jobLog, parentId: run.parentId, range: partOf(run.params) ?? undefined } };
    jobLog.info({ budget: { softMs: run.budgetSoftMs, hardMs: run.budgetHardMs, source: run.budgetSource }, cursor: run.cursor }, "run started");
    work = Promise.resolve()
      .then(() => processor(ctx))
      .then(
        (result) => ({ type: "done" as const, result: result ?? {} }),
        (error: unknown) => ({ type: "error" as const, error }),
      );
    outcome = await Promise.race([work, hard]);
  } finally {
    softTimer.clear();
    hardTimer?.clear();
    clearInterval(beat);
    shutdown.removeEventListener("abort", onShutdown);
    watch?.end(jobId);
  }
  await softFired;

  if (outcome.type === "hard") {
    // The processor ignored its signal. Its row is closed and fenced; the slot is freed now, and
    // whatever the processor still does cannot commit.
    await finalizeJob(jobId, attempt, { status: "killed", message: killedMessage, from: ["running", "timed_out"], known: run });
    deadline.abort(new DeadlineExceeded(jobId, run.budgetSoftMs));
    jobLog.error({ hardMs: run.budgetHardMs }, "hard limit reached: run abandoned and fenced");
    void work.then((late) => jobLog.warn({ late: late.type }, "abandoned run settled after the hard limit"));
    throw new UnrecoverableError("hard limit reached");
  }

  const deadlinePassed = deadline.signal.aborted && deadline.signal.reason instanceof DeadlineExceeded;
  if (outcome.type === "done") {
    if (deadlinePassed) throw new UnrecoverableError("soft limit reached");
    const finalized = await finalizeJob(jobId, attempt, {
      // Completed with item failures is its own status, decided from the committed counts.
      status: "completed",
      message: outcome.result.message ?? defaultMessage,
      from: ["running"],
      result: outcome.result.result,
      // A run whose counts are still those it started with finishes in one statement; otherwise in two.
      known: run,
    });
    if (!finalized) jobLog.warn("run finished but the row was no longer this attempt's (reaped or superseded)");
    else jobLog.info("run finished");
    return;
  }

  const err = outcome.error;
  const name = err instanceof Error ? err.name : "";
  if (shutdown.aborted && !deadlinePassed && !(err instanceof JobFailed)) {
    // The worker is stopping: the row goes back to queued (only if this attempt still owns it),
    // and the caller hands the queue job back, so another worker resumes at the cursor.
    await handBack(jobId, attempt);
    throw err;
  }
  if (name === "RateLimitDefer" && !deadlinePassed) {
    // The job gives its slot back until the window opens: the row says so (and what it waits
    // for); the queue wrapper moves the queue job to delayed. Past its maximum age, it ends here.
    const deferred = await rescheduleRun(run, attemptStart, err as Error, jobLog);
    if (deferred === "timed_out") throw new UnrecoverableError("maximum age reached");
    if (deferred === "fenced") return;
    throw err;
  }
  if (name === "DelayedError") throw err;
  if (deadlinePassed || name === "DeadlineExceeded") {
    // Normally already finalized by the soft timer; this covers a processor that threw first.
    await finalizeJob(jobId, attempt, { status: "timed_out", message: timedOutMessage, from: ["running"], known: run });
    throw new UnrecoverableError("soft limit reached");
  }
  if (name === "AttemptFenced") {
    // A newer attempt (or a finalizer) owns the row: this run leaves quietly and writes nothing.
    jobLog.warn("attempt fenced: the row is no longer this run's; stopping");
    return;
  }
  if (err instanceof JobFailed) {
    await finalizeJob(jobId, attempt, { status: "failed", message: err.message });
    throw new UnrecoverableError(err.message);
  }
  jobLog.error({ err }, "run failed");
  await finalizeJob(jobId, attempt, { status: "failed", message: "The job failed because of an internal error. An operator can retry it." });
  throw new UnrecoverableError(err instanceof Error ? err.message : String(err));
}
