import { db } from "@/lib/db/client";
import { TERMINAL_STATUSES } from "@/lib/core/job-statuses";
import { countLabel } from "@/lib/jobs/messages";

/** Terminal statuses that mean "this job did not do its work" (as on the overview). */
const BAD_ENDINGS = ["failed", "timed_out", "killed", "abandoned"] as const;

/** The window of the overview's failure card: recent enough to be about now. */
export const RECENT_FAILURES_MS = 60 * 60_000;

export interface RecentFailures {
  /** Jobs that ended failed, timed out, killed or abandoned within the window. */
  jobs: number;
  /** Items (rows, files, pages) recorded as failed by the jobs that finished within the window. */
  items: number;
  windowMs: number;
}

/** Failures of the last hour, jobs and items, from the job rows (indexed by status and finish time). */
export async function countRecentFailures(now = new Date()): Promise<RecentFailures> {
  const since = new Date(now.getTime() - RECENT_FAILURES_MS);
  const [bad, items] = await Promise.all([
    db().job.count({ where: { status: { in: [...BAD_ENDINGS] }, finishedAt: { gte: since } } }),
    db().job.aggregate({
      where: { status: { in: [...TERMINAL_STATUSES] }, finishedAt: { gte: since } },
      _sum: { failed: true },
    }),
  ]);
  return { jobs: bad, items: items._sum.failed ?? 0, windowMs: RECENT_FAILURES_MS };
}

/** What the overview's failure card says of `f`: whether it is an alarm, where it links, and its line. */
export interface FailuresCard {
  alert: boolean;
  href: string;
  note: string;
}

/**
 * Only a job that ended badly is an alarm: an item is recorded failed only for its own fault (a bad
 * row, a damaged file; lib/runs/item-fault.ts), which its job reports and its customer fixes — a
 * healthy system has them. The card links to the jobs behind its count.
 */
export function failuresCard(f: RecentFailures): FailuresCard {
  if (f.jobs > 0)
    return {
      alert: true,
      href: "/jobs?status=failed",
      note: `and ${countLabel(f.jobs, "job")} ended failed, timed out, stopped or abandoned`,
    };
  return {
    alert: false,
    href: "/jobs?status=completed_with_errors",
    note: `${f.items > 0 ? "each for its own input; " : ""}no job ended failed, timed out, stopped or abandoned`,
  };
}
