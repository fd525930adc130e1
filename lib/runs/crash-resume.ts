import { db } from "@/lib/db/client";
import { metrics } from "@/lib/metrics/metrics";
import { countLabel, nounOf, progressPhrase, type FinalRow } from "@/lib/jobs/messages";
import { finalizeJob } from "./finalize";
import type { JobStatus } from "@/lib/core/job-statuses";

/**
 * Resuming a job whose run stopped without settling — its worker process died (SIGKILL, out of
 * memory, a machine gone) or lost the job (BullMQ's lock lapsed) — from its cursor, a bounded
 * number of times. Two places notice such a run: a worker that picks up the queue job BullMQ
 * found stalled and finds the row still `running` under the dead attempt
 * (`takeOverStalledRun`), and the reaper, for a row whose queue job is gone or that is silent
 * past its hard limit (`resumeStoppedRun`). Both count the resume on the row and write a
 * `crash_resumed` event; the run that follows fences the dead one with a new attempt, and
 * commits are exactly-once per item, so nothing committed is redone and nothing is skipped.
 */

/**
 * How many times one job is resumed after its run stopped without settling before it ends for
 * good. A run that kills its worker every time (a document that exhausts memory, a parser that
 * crashes the process) would otherwise take worker after worker down forever; three resumes ride
 * out the deaths nobody can prevent (a deploy, a machine lost, an out-of-memory kill caused by a
 * neighbour) and stop a job that is itself the cause. An operator's retry starts the count again.
 */
export const MAX_CRASH_RESUMES = 3;

/** What a person reads on a job stopped at the bound. */
export function crashStoppedMessage(row: Pick<FinalRow, "kind" | "total" | "processed" | "failed">): string {
  return `Stopped after its worker died ${MAX_CRASH_RESUMES + 1} times while running it; ${progressPhrase(row)} were done. Retry to continue.`;
}

/** The row as the resuming side read it: the resume is refused if its status, attempt or count moved since. */
export interface StoppedRun extends FinalRow {
  id: string;
  status: JobStatus;
  attempt: number;
  crashResumes: number;
}

export type CrashResume =
  /** Counted; the job continues from its cursor (resume `resumes` of `MAX_CRASH_RESUMES`). */
  | { type: "resumed"; resumes: number; attempt: number }
  /** The bound was reached: the row is finalized `failed` with `crashStoppedMessage`. */
  | { type: "stopped" }
  /** The row moved on meanwhile (another worker or the reaper took it, or it ended): nothing done. */
  | { type: "moved_on" };

/**
 * Counts one resume of a run that stopped without settling, or ends the job at the bound. With
 * `requeue` (the reaper), the row also goes back to `queued` under a new attempt with a fresh sign
 * of life — fencing whatever the stopped run might still try to write, as a retry does — and the
 * caller re-adds its queue job; without it (a worker taking over a stalled queue job), the row
 * stays `running` and the worker's own attempt start fences the stopped run.
 */
export async function resumeStoppedRun(row: StoppedRun, how: { requeue: boolean; why: string }): Promise<CrashResume> {
  if (row.crashResumes >= MAX_CRASH_RESUMES) {
    const status = await finalizeJob(row.id, row.attempt, {
      status: "failed",
      from: [row.status],
      message: crashStoppedMessage,
      known: row,
    });
    return status ? { type: "stopped" } : { type: "moved_on" };
  }
  const resumes = row.crashResumes + 1;
  const message = `${how.why}: resumed from where it stopped, after ${countLabel(row.cursor, nounOf(row.kind))} already done (resume ${resumes} of ${MAX_CRASH_RESUMES} after a stopped run).`;
  const rows = await db().$queryRaw<{ attempt: number }[]>`
    WITH resumed AS (
      UPDATE "Job"
      SET "crashResumes" = "crashResumes" + 1,
          status = CASE WHEN ${how.requeue} THEN 'queued'::"JobStatus" ELSE status END,
          attempt = attempt + CASE WHEN ${how.requeue} THEN 1 ELSE 0 END,
          "heartbeatAt" = CASE WHEN ${how.requeue} THEN now() AT TIME ZONE 'UTC' ELSE "heartbeatAt" END,
          message = CASE WHEN ${how.requeue} THEN ${message} ELSE message END,
          "updatedAt" = now() AT TIME ZONE 'UTC'
      WHERE id = ${row.id}::uuid AND attempt = ${row.attempt}::int AND status = ${row.status}::"JobStatus"
        AND "crashResumes" = ${row.crashResumes}::int
      RETURNING attempt
    ), event AS (
      INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
      SELECT ${row.id}::uuid, now() AT TIME ZONE 'UTC', 'crash_resumed', attempt, ${message} FROM resumed
    )
    SELECT attempt FROM resumed`;
  const resumed = rows[0];
  if (!resumed) return { type: "moved_on" };
  metrics.jobsCrashResumed.inc({ kind: row.kind });
  return { type: "resumed", resumes, attempt: resumed.attempt };
}

/**
 * A worker picked up a queue job BullMQ had found stalled. If its row is still `running`, the run
 * that held it stopped without settling: count the resume (or end the job at the bound) before
 * this worker's attempt start takes the row over. Null when the row is not `running` (it was
 * handed back, rescheduled or ended properly): nothing to take over.
 */
export async function takeOverStalledRun(jobId: string): Promise<CrashResume | null> {
  const rows = await db().$queryRaw<StoppedRun[]>`
    SELECT id::text AS id, kind, status, attempt, cursor, "crashResumes", total, processed, failed, "budgetSoftMs", "budgetHardMs"
    FROM "Job" WHERE id = ${jobId}::uuid`;
  const row = rows[0];
  if (row?.status !== "running") return null;
  return resumeStoppedRun(row, {
    requeue: false,
    why: `Attempt ${row.attempt} stopped without finishing (its worker died or lost the job)`,
  });
}
