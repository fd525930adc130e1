import { db, Prisma } from "@/lib/db/client";
import { env } from "@/lib/env";
import {
  AUTO_RESUMED_EVENT,
  MARKED_FAILED_PREFIX,
  nextAutoResume,
  OPERATOR_STATUSES,
  resumeRuleOf,
  type EndCause,
  type OperatorAction,
} from "./resume-policy";
import { summaryOf, type JobSummary, type JobSummaryRow } from "./job-summary";

/**
 * Jobs that ended and wait on a person (lib/diagnosis/resume-policy.ts: `awaits`) whom nobody has
 * acted on yet. Acting is what takes a job out: a retry reopens it (no longer terminal), a split
 * gives it parts, and "mark handled" writes a `handled` timeline event after its end (a person
 * dealt with it otherwise: told the customer, decided it is not worth continuing). A job that
 * ends again after a retry waits again: only a `handled` event since its latest end counts.
 */

/** The timeline event "mark handled" writes. */
export const HANDLED_EVENT = "handled";

/**
 * Ended rows read per look, newest end first (so a new ending is always looked at, whatever piled up before). Jobs waiting on a person are few when someone is
 * told about them (the alert fires within the hour); the cap bounds the page and the scrape if
 * that ever stops being true, and the page says when it is reached.
 */
export const AWAITING_ROWS_CHECKED = 5_000;

export interface AwaitingJob extends JobSummary {
  finishedAt: string;
  message: string | null;
  cause: EndCause;
  /** The cause in a few words. */
  title: string;
  /** What continues it. */
  action: OperatorAction;
  /** Production ms since the customer sent it: how long they have waited so far. */
  customerWaitMs: number;
  /** Production ms since it ended: how long it has waited on a person. */
  waitingMs: number;
}

export interface EndedJobRow extends JobSummaryRow {
  finishedAt: Date | null;
  updatedAt: Date;
  message: string | null;
  parentId: string | null;
  cursor: number;
  /** `auto_resumed` events since the last retry (a person's retry starts the count again). */
  autoResumes: number;
}

/**
 * The conditions of the partial index Job_awaiting_ended_idx (prisma/migrations/
 * 20261206150000_dashboard_history_reads), written as its predicate is so the planner reads it: an
 * operator status, not marked handled since it ended (`handledAt`, the latest `handled` event, kept
 * by a trigger), not ended by a person from the stuck page (resume-policy: marked_failed). Jobs
 * on-call has dealt with are not in the index, so the read costs the jobs that wait, not the history.
 */
const MAY_AWAIT = Prisma.raw(
  `j.status IN (${OPERATOR_STATUSES.map((s) => `'${s}'`).join(", ")})
      AND (j."handledAt" IS NULL OR j."handledAt" < coalesce(j."finishedAt", j."updatedAt"))
      AND (j.message IS NULL OR left(j.message, ${MARKED_FAILED_PREFIX.length}) <> '${MARKED_FAILED_PREFIX.replaceAll("'", "''")}')`,
);

/**
 * Ended rows that may wait on a person (a job retried, split, marked handled or marked failed does
 * not), newest end first. Two reads: the rows, then their automatic resumes. One statement with the
 * count as a subquery per row is planned for every job the planner guesses may wait — a guess that
 * grows with the history, since it cannot know how few jobs the index holds — and past a few
 * thousand that plan is compiled (JIT) on every look, costing more than the read itself.
 */
export async function endedRows(ids?: string[]): Promise<EndedJobRow[]> {
  const rows = await db().$queryRaw<Omit<EndedJobRow, "autoResumes">[]>`
    SELECT j.id, j.kind, j.queue, t.slug AS tenant, j.status, j.attempt, j.total, j.processed, j.failed,
           j."createdAt", j."finishedAt", j."updatedAt", j."budgetSoftMs", j."budgetHardMs", j.message, j."parentId", j.cursor
    FROM "Job" j JOIN "Tenant" t ON t.id = j."tenantId"
    WHERE ${MAY_AWAIT}
      AND (${ids === undefined} OR j.id = ANY(${ids ?? []}::uuid[]))
      AND NOT EXISTS (SELECT 1 FROM "Job" c WHERE c."parentId" = j.id)
    ORDER BY coalesce(j."finishedAt", j."updatedAt") DESC
    LIMIT ${AWAITING_ROWS_CHECKED}`;
  if (rows.length === 0) return [];
  // `auto_resumed` events since the job's last retry (a person's retry starts the count again).
  const resumes = await db().$queryRaw<{ jobId: string; n: number }[]>`
    SELECT a."jobId", count(*)::int AS n FROM "JobEvent" a
    WHERE a."jobId" = ANY(${rows.map((r) => r.id)}::uuid[]) AND a.type = ${AUTO_RESUMED_EVENT}
      AND a.at > coalesce((SELECT max(r.at) FROM "JobEvent" r WHERE r."jobId" = a."jobId" AND r.type = 'retry'), '-infinity')
    GROUP BY a."jobId"`;
  const count = new Map(resumes.map((r) => [r.jobId, r.n]));
  return rows.map((r) => ({ ...r, autoResumes: count.get(r.id) ?? 0 }));
}

/**
 * Every job waiting on an operator now (or those of `ids`), oldest end first — of the newest
 * `AWAITING_ROWS_CHECKED` endings read.
 */
export async function listAwaitingOperator(now = new Date(), ids?: string[]): Promise<AwaitingJob[]> {
  const scale = env().BOUNDED_TIME_SCALE;
  const jobs: AwaitingJob[] = [];
  for (const r of (await endedRows(ids)).reverse()) {
    const rule = resumeRuleOf({ status: r.status, kind: r.kind, message: r.message, hasParts: false });
    if (!rule?.awaits || !rule.action) continue;
    const finishedAt = r.finishedAt ?? r.updatedAt;
    // The platform's to resume while it still will: nobody waits for a person yet.
    if (
      rule.resumes === "platform" &&
      nextAutoResume({ finishedAt, createdAt: r.createdAt, autoResumes: r.autoResumes }, scale)
    )
      continue;
    jobs.push({
      ...summaryOf(r),
      finishedAt: finishedAt.toISOString(),
      message: r.message,
      cause: rule.cause,
      title: rule.title,
      action: rule.action,
      customerWaitMs: Math.max(0, (now.getTime() - r.createdAt.getTime()) / scale),
      waitingMs: Math.max(0, (now.getTime() - finishedAt.getTime()) / scale),
    });
  }
  return jobs;
}

/**
 * When the platform resumes this ended job by itself, real time; null when nothing will
 * (lib/diagnosis/resume-policy.ts).
 */
export async function scheduledAutoResume(jobId: string): Promise<Date | null> {
  const [r] = await endedRows([jobId]);
  if (!r) return null;
  const rule = resumeRuleOf({ status: r.status, kind: r.kind, message: r.message, hasParts: false });
  if (rule?.resumes !== "platform") return null;
  return nextAutoResume(
    { finishedAt: r.finishedAt ?? r.updatedAt, createdAt: r.createdAt, autoResumes: r.autoResumes },
    env().BOUNDED_TIME_SCALE,
  );
}
