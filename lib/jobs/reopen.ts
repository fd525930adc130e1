import { db } from "@/lib/db/client";
import type { JobStatus } from "@/lib/core/job-statuses";
import { lockTenantOfJob } from "@/lib/tenants/being-deleted";

/** Only a job that ended without finishing its work can be retried (a cancelled one too: it resumes at its cursor). */
export const RETRYABLE_STATUSES = [
  "timed_out",
  "killed",
  "failed",
  "abandoned",
  "cancelled",
] as const satisfies readonly JobStatus[];

/**
 * Puts a retryable job back to `queued` for another attempt, in one statement (a double click, two
 * operators, or a queue job retried from outside at the same time give exactly one retry): its
 * "retry" event with `message`, and a part's parent reopened. The next run's start bumps the
 * attempt, fencing every earlier run. False when the row is no longer in a retryable status, or
 * its tenant is being deleted (nothing of it may run again).
 * `budget` is written when given (an operator's choice); otherwise the next start resolves it.
 */
export async function reopenForRetry(input: {
  jobId: string;
  parentId: string | null;
  message: string;
  /** Who retried, for the parent's reopen message. */
  by: string;
  budget?: { softMs: number; hardMs: number; source: string };
  /** The timeline event: `retry` (a person, or a queue tool) or `auto_resumed` (the platform, lib/diagnosis/resume-policy.ts). @defaultValue "retry" */
  eventType?: "retry" | "auto_resumed";
}): Promise<boolean> {
  const { jobId, message, by } = input;
  const budget = input.budget
    ? { budgetSoftMs: input.budget.softMs, budgetHardMs: input.budget.hardMs, budgetSource: input.budget.source }
    : {};
  return db().$transaction(async (tx) => {
    if (await lockTenantOfJob(tx, jobId)) return false;
    const { count } = await tx.job.updateMany({
      // A job whose detail the retention pass removed has nothing to resume from (lib/retention).
      where: { id: jobId, status: { in: [...RETRYABLE_STATUSES] }, detailPrunedAt: null },
      // The retry is a sign of life: the reaper gives the row its grace from now, not from the
      // last run's heartbeat (it would otherwise see a queued row whose old queue job is finished).
      // A person's decision starts the count of resumes after stopped runs again (lib/runs/crash-resume.ts).
      data: { status: "queued", message, finishedAt: null, heartbeatAt: new Date(), ...budget, crashResumes: 0 },
    });
    if (count === 0) return false;
    const { attempt } = await tx.job.findUniqueOrThrow({ where: { id: jobId }, select: { attempt: true } });
    await tx.jobEvent.create({ data: { jobId, type: input.eventType ?? "retry", attempt, message } });
    if (input.parentId) {
      // A retried part reopens the job it was split from, which then ends again with its last part.
      const reopen = `Part retried by ${by}; it ends when its last part ends.`;
      const { count: reopened } = await tx.job.updateMany({
        where: { id: input.parentId, status: { in: [...RETRYABLE_STATUSES] } },
        data: { status: "running", finishedAt: null, message: reopen },
      });
      if (reopened > 0) {
        const parent = await tx.job.findUniqueOrThrow({ where: { id: input.parentId }, select: { attempt: true } });
        await tx.jobEvent.create({
          data: { jobId: input.parentId, type: "reopened", attempt: parent.attempt, message: reopen },
        });
      }
    }
    return true;
  });
}
