import { env } from "@/lib/env";
import type { Logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import type { RedisClient } from "@/lib/redis/client";
import { pruneOnce, type ClassPruned } from "@/lib/retention/prune";
import { startLeasedInterval } from "./leased-interval";

/**
 * Runs the retention pass (lib/retention/prune.ts) every `BOUNDED_RETENTION_EVERY_S` (ten
 * minutes; real time, as the days it keeps are) in whichever worker process holds the lease: each
 * class's rows past its days deleted in small batches, counted in
 * `bounded_retention_pruned_rows_total{class}`. A class left behind is picked up by the next pass;
 * `bounded_retention_overdue_seconds` says when passes stop keeping up.
 */
export function startRetention(
  redis: RedisClient,
  log: Logger,
  prune: () => Promise<ClassPruned[]> = () => pruneOnce(),
): () => void {
  const intervalMs = env().BOUNDED_RETENTION_EVERY_S * 1000;
  const schedule = { name: "retention", intervalMs, failure: "the retention pass failed" };
  return startLeasedInterval(redis, log, schedule, async () => {
    for (const pruned of await prune()) {
      const rows = Object.values(pruned.removed).reduce((a, b) => a + b, 0);
      if (rows > 0) metrics.retentionPruned.inc({ class: pruned.name }, rows);
      if (rows > 0 || pruned.behind)
        log.info(
          { class: pruned.name, removed: pruned.removed, jobs: pruned.jobs, behind: pruned.behind },
          "retention pass",
        );
    }
  });
}
