import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { db } from "@/lib/db/client";
import { HANDLED_EVENT, listAwaitingOperator } from "@/lib/diagnosis/awaiting-operator";

/** What "mark handled" is sent: the jobs the operator saw, by id (never "all"), and why. */
export const markHandledSchema = z
  .object({
    jobIds: z
      .array(z.uuid({ error: "Each job id must be a UUID." }), {
        error: 'Send "jobIds": the ids of the jobs to mark handled.',
      })
      .max(100_000)
      .default([]),
    /** In the operator's words: what was done instead of continuing it. */
    reason: z.string().trim().max(300).optional(),
  })
  .strict();
export type MarkHandledRequest = z.infer<typeof markHandledSchema>;

export type MarkHandledResult =
  | { type: "empty_selection" }
  | { type: "over_cap"; count: number; cap: number }
  | { type: "done"; selected: number; done: number; refused: { jobId: string; reason: string }[] };

/** At most this many jobs at once, as every bulk action. */
export const MARK_HANDLED_CAP = 1_000;

/**
 * Marks jobs that wait on an operator as handled: each gets a `handled` timeline event naming
 * who and why, which takes it out of the group, the gauge and the alert until it ends again. Each
 * is re-checked first: one that no longer waits (retried, split, handled by someone else) is
 * refused with why, and the insert is guarded by its status and attempt as seen, so a job retried
 * meanwhile is refused rather than marked. (Two operators marking the same job in the same instant
 * may both write their event: harmless, it says twice that it was handled.)
 */
export async function markJobsHandled(request: MarkHandledRequest, by: Principal): Promise<MarkHandledResult> {
  const ids = [...new Set(request.jobIds)];
  if (ids.length === 0) return { type: "empty_selection" };
  if (ids.length > MARK_HANDLED_CAP) return { type: "over_cap", count: ids.length, cap: MARK_HANDLED_CAP };
  const waiting = new Map((await listAwaitingOperator(new Date(), ids)).map((j) => [j.id, j]));
  const refused: { jobId: string; reason: string }[] = [];
  let done = 0;
  for (const id of ids) {
    const job = waiting.get(id);
    if (!job) {
      refused.push({
        jobId: id,
        reason: "It is not waiting on an operator (retried, split, handled already, or still open).",
      });
      continue;
    }
    const message = `Marked handled by ${by.username} (${job.title.toLowerCase()})${request.reason ? `: ${request.reason}` : ""}. It no longer counts as waiting on an operator.`;
    const written = await db().$executeRaw`
      INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
      SELECT j.id, now() AT TIME ZONE 'UTC', ${HANDLED_EVENT}, j.attempt, ${message}
      FROM "Job" j
      WHERE j.id = ${id}::uuid AND j.status = ${job.status}::"JobStatus" AND j.attempt = ${job.attempt}::int
        AND NOT EXISTS (SELECT 1 FROM "JobEvent" e WHERE e."jobId" = j.id AND e.type = ${HANDLED_EVENT} AND e.at >= coalesce(j."finishedAt", j."updatedAt"))`;
    if (written === 0) refused.push({ jobId: id, reason: "It changed meanwhile; nothing was written." });
    else done += 1;
  }
  return { type: "done", selected: ids.length, done, refused };
}
