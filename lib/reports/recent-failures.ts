import { db } from "@/lib/db/client";
import { TERMINAL_STATUSES } from "@/lib/core/job-statuses";

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
