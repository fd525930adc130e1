import { env, type Env } from "@/lib/env";
import { pruneJobDetail, pruneJobs, pruneTenantResults } from "./jobs";
import type { ClassRun, Removed } from "./pass";
import { cutoffOf, RETENTION_CLASSES, type RetentionClassName } from "./policy";
import { pruneTables } from "./tables";

/**
 * One retention pass: each class's rows older than its days (./policy.ts) are deleted in small
 * batches, each its own short transaction, so the work never waits long behind a pass, and each
 * followed by a rest `BOUNDED_RETENTION_REST_FACTOR` times its length, so the pass never takes
 * more than its share of the database (./pass.ts, `pacedOutOfTime`). A class
 * that still has rows past its retention when its share of the pass is used up is `behind`; the
 * next pass goes on from there. A dry run deletes nothing and counts what a pass would remove.
 */
export interface PruneOptions {
  now?: Date;
  dryRun?: boolean;
  /** Rows (for the job classes: jobs) per batch. @defaultValue 500 */
  batch?: number;
  /** Real ms a class may take in one pass before it is left for the next. @defaultValue 5,000 */
  classBudgetMs?: number;
  /** Only these classes. @defaultValue all */
  classes?: readonly RetentionClassName[];
  /** A batch's time × this is rested after it. @defaultValue `BOUNDED_RETENTION_REST_FACTOR` */
  restFactor?: number;
  env?: Env;
}

export interface ClassPruned extends Removed {
  name: RetentionClassName;
  /** What ended before this was past the class's days; null for the tenants' results (each tenant's own). */
  cutoff: Date | null;
}

export async function pruneOnce(options: PruneOptions = {}): Promise<ClassPruned[]> {
  const now = options.now ?? new Date();
  const e = options.env ?? env();
  const names = options.classes ?? RETENTION_CLASSES.map((c) => c.name);
  const results: ClassPruned[] = [];
  for (const name of names) {
    const cutoff = name === "tenant_results" ? null : cutoffOf(name, now, e);
    const run: ClassRun = {
      cutoff: cutoff ?? now,
      now,
      batch: options.batch ?? 500,
      until: performance.now() + (options.classBudgetMs ?? 5_000),
      dryRun: options.dryRun ?? false,
      restFactor: options.restFactor ?? e.BOUNDED_RETENTION_REST_FACTOR,
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      batchStartedAt: performance.now(),
    };
    results.push({ name, cutoff, ...(await pruneClass(name, run)) });
  }
  return results;
}

function pruneClass(name: RetentionClassName, run: ClassRun): Promise<Removed> {
  switch (name) {
    case "job_detail":
      return pruneJobDetail(run);
    case "jobs":
      return pruneJobs(run);
    case "tenant_results":
      return pruneTenantResults(run);
    default:
      return pruneTables(name, run);
  }
}
