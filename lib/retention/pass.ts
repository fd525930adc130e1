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

/** `performance.now()` is past the class's share of the pass. */
export const outOfTime = (run: ClassRun) => performance.now() > run.until;
