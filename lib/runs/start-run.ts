import { DelayedError, UnrecoverableError, type Job as QueueJob } from "bullmq";
import { resolveBudget } from "@/lib/budgets/budgets";
import { outageBackoffMs } from "@/lib/dependencies/pause";
import { isDependencyUnavailable } from "@/lib/dependencies/unavailable";
import type { Logger } from "@/lib/log";
import { startAttempt, type RunStart } from "./attempt";
import { takeOverStalledRun } from "./crash-resume";
import { reconcileRerun } from "./rerun";

/** What starting a run needs: the row's id, the moment the attempt starts, and the queue job it came in. */
export interface RunStartRequest {
  jobId: string;
  attemptStart: Date;
  queueJob: QueueJob;
  shutdown: AbortSignal;
  log: Logger;
  token: string | undefined;
}

/**
 * Starts the run's attempt (fenced: the attempt number goes up). Null when there is nothing to run
 * (the row already completed); a queue job that must not run fails for good with why; a start the
 * database cannot take now goes back to the queue.
 */
export async function startRun(r: RunStartRequest): Promise<RunStart | null> {
  const run = await startOrGoBack(r);
  return run ?? reconcileTerminalRow(r);
}

/**
 * The attempt's start, after taking over a stalled run. A worker stopping while its database goes
 * away, or a database that is not reachable: the queue job goes back untouched (without spending
 * an attempt), to start when it answers.
 */
async function startOrGoBack({
  jobId,
  attemptStart,
  queueJob,
  shutdown,
  log,
  token,
}: RunStartRequest): Promise<RunStart | null> {
  try {
    // A queue job BullMQ found stalled whose row is still `running`: its run stopped without
    // settling (the worker died or lost it). The resume is counted, and bounded (./crash-resume.ts).
    if (queueJob.stalledCounter > 0 && (await takeOverStalledRun(jobId))?.type === "stopped") {
      const reason = `Job ${jobId} stopped with its worker too many times; it was ended, not resumed (see its page).`;
      log.warn({ jobId }, "its runs stopped without finishing too many times: the job is ended, not resumed");
      // The queue job fails too, so a queue tool never shows "completed" beside an ended row.
      throw new UnrecoverableError(reason);
    }
    return await startAttempt(jobId, attemptStart, resolveBudget);
  } catch (err) {
    const outage = isDependencyUnavailable(err);
    if ((!shutdown.aborted && !outage) || token === undefined) throw err;
    if (outage)
      log.warn(
        { jobId, err: (err as Error).message },
        "the database is not reachable: the job starts again in a moment",
      );
    await queueJob.moveToDelayed(Date.now() + (outage ? outageBackoffMs(3) : 0), token);
    throw new DelayedError();
  }
}

/** A queue job whose row is already terminal: retried from outside Bounded, or left over (./rerun.ts). */
async function reconcileTerminalRow({ jobId, attemptStart, queueJob, log }: RunStartRequest): Promise<RunStart | null> {
  const rerun = await reconcileRerun(jobId, (queueJob.attemptsMade ?? 0) > 0);
  const run = rerun.type === "resume" ? await startAttempt(jobId, attemptStart, resolveBudget) : null;
  if (run) return run;
  if (rerun.type === "done") {
    log.info({ jobId }, "job already completed; nothing to run");
    return null;
  }
  const reason =
    rerun.type === "refused"
      ? rerun.reason
      : `Job ${jobId} changed while it was being retried from the queue; it was not run.`;
  log.warn({ jobId, reason }, "queue job ran for a finished job: not run");
  throw new UnrecoverableError(reason);
}
