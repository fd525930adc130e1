import { Prisma } from "@/lib/db/client";

/** One class's share of a retention pass, as each pruning function reads it. */
export interface ClassRun {
  /** What ended (or was written) before this is past the class's days (the tenants' results work out each tenant's own). */
  cutoff: Date;
  now: Date;
  /** Rows (for the job classes: jobs) per batch, each batch its own short transaction. */
  batch: number;
  /** `performance.now()` past which the class stops and is `behind` if anything is left. */
  until: number;
  /** Count what would go, delete nothing. */
  dryRun: boolean;
  /**
   * After each batch the class rests this many times as long as the batch took (0: never), so the
   * pass uses at most 1 ÷ (1 + restFactor) of the database's time for it: the work beside it
   * slows by a fraction of that, never stalls. `BOUNDED_RETENTION_REST_FACTOR`.
   */
  restFactor: number;
  /** Resolves after `ms` real ms (a test's clock in tests). */
  sleep: (ms: number) => Promise<void>;
  /** `performance.now()` when the batch under way started; `paced` sets it. */
  batchStartedAt: number;
}

/** What a class's share of a pass removed (or would), per table. */
export interface Removed {
  removed: Record<string, number>;
  /** For the job classes: the jobs whose detail, row or results went. */
  jobs?: number;
  /** Rows past the retention still there when the class's share of the pass ran out. */
  behind: boolean;
}

/** A Date as a parameter of a `timestamp` (UTC) comparison, as the rest of the statements write it. */
export const utc = (d: Date) => Prisma.sql`${d.toISOString()}::timestamptz AT TIME ZONE 'UTC'`;

/**
 * Between two batches: rests `restFactor` × the batch that just ended (not in a dry run, which
 * deletes nothing), then says whether the class's share of the pass is used up — if not, the next
 * batch starts now.
 */
export async function pacedOutOfTime(run: ClassRun): Promise<boolean> {
  if (!run.dryRun && run.restFactor > 0) await run.sleep((performance.now() - run.batchStartedAt) * run.restFactor);
  const now = performance.now();
  run.batchStartedAt = now;
  return now > run.until;
}
