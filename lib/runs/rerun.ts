import { db } from "@/lib/db/client";
import { countLabel, nounOf } from "@/lib/jobs/messages";
import { reopenForRetry, RETRYABLE_STATUSES } from "@/lib/jobs/reopen";
import { isTerminal } from "@/lib/core/job-statuses";

/**
 * A queue job that runs while its row is already terminal. Bounded never does that itself (its
 * retry reopens the row first), so it comes from outside: BullMQ's `job.retry()` on a failed or
 * completed queue job (bull-board's Retry button), or a queue job added again by hand. The queue
 * and the row must not disagree afterwards (a queue job "completed" while its row says failed):
 * - retried from outside (BullMQ counts an earlier finish) and the row is retryable: the row is
 *   reopened exactly as an operator's retry does it (`reopenForRetry`: one statement, the next
 *   start bumps the attempt and fences every older run) and the run resumes at its cursor;
 * - the row completed: nothing to do, the queue job completes too;
 * - anything else: the queue job fails with a reason that says why and what to do instead.
 */
export type Rerun = { type: "resume" } | { type: "done" } | { type: "refused"; reason: string };

export async function reconcileRerun(jobId: string, retriedFromOutside: boolean): Promise<Rerun> {
  const row = await db().job.findUnique({
    where: { id: jobId },
    select: { status: true, cursor: true, kind: true, parentId: true, _count: { select: { children: true } } },
  });
  if (!row) return { type: "refused", reason: `Job ${jobId} no longer exists in Bounded: there is nothing to run.` };
  // Reopened meanwhile (an operator's retry won the race): the caller starts it as any queued job.
  if (!isTerminal(row.status)) return { type: "resume" };
  if (row.status === "completed" || row.status === "completed_with_errors") return { type: "done" };
  const retryHere = `retry it in Bounded (the job page, or POST /api/jobs/${jobId}/retry)`;
  if (!retriedFromOutside)
    return {
      type: "refused",
      reason: `The job is already ${row.status} in Bounded; this queue job was not run. To resume it, ${retryHere}.`,
    };
  if (row._count.children > 0)
    return { type: "refused", reason: `The job was split into parts: retry the parts instead.` };
  if (!(RETRYABLE_STATUSES as readonly string[]).includes(row.status))
    return { type: "refused", reason: `A ${row.status} job cannot be retried.` };
  const message = `Retried from the queue (outside Bounded): resumes after ${countLabel(row.cursor, nounOf(row.kind))} already done.`;
  if (await reopenForRetry({ jobId, parentId: row.parentId, message, by: "a queue retry" })) return { type: "resume" };
  // Reopened by someone else in between: start it like any queued job.
  return { type: "resume" };
}
