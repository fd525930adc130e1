import { db } from "@/lib/db/client";
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

/** Ended rows that may wait on a person (a job retried, split, marked handled or marked failed does not), newest end first. */
export async function endedRows(ids?: string[]): Promise<EndedJobRow[]> {
  return db().$queryRaw<EndedJobRow[]>`
    SELECT j.id, j.kind, j.queue, t.slug AS tenant, j.status, j.attempt, j.total, j.processed, j.failed,
           j."createdAt", j."finishedAt", j."updatedAt", j."budgetSoftMs", j."budgetHardMs", j.message, j."parentId", j.cursor,
           (SELECT count(*)::int FROM "JobEvent" a WHERE a."jobId" = j.id AND a.type = ${AUTO_RESUMED_EVENT}
              AND a.at > coalesce((SELECT max(r.at) FROM "JobEvent" r WHERE r."jobId" = j.id AND r.type = 'retry'), '-infinity')) AS "autoResumes"
    FROM "Job" j JOIN "Tenant" t ON t.id = j."tenantId"
    WHERE j.status = ANY(${[...OPERATOR_STATUSES]}::"JobStatus"[])
      AND (${ids === undefined} OR j.id = ANY(${ids ?? []}::uuid[]))
      AND NOT EXISTS (SELECT 1 FROM "Job" c WHERE c."parentId" = j.id)
      AND NOT EXISTS (SELECT 1 FROM "JobEvent" e WHERE e."jobId" = j.id AND e.type = ${HANDLED_EVENT} AND e.at >= coalesce(j."finishedAt", j."updatedAt"))
      -- Ended by a person from the stuck page: nobody waits on another one (resume-policy: marked_failed).
      AND (j.message IS NULL OR left(j.message, ${MARKED_FAILED_PREFIX.length}) <> ${MARKED_FAILED_PREFIX})
    ORDER BY coalesce(j."finishedAt", j."updatedAt") DESC
    LIMIT ${AWAITING_ROWS_CHECKED}`;
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
