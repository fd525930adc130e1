import { listOverdueDelayedJobs } from "@/lib/reports/stuck";
import { reapStuckJobs } from "@/lib/runs/reaper";
import { reaperIntervalMs } from "@/lib/jobs/liveness";
import type { Logger } from "@/lib/log";
import type { RedisClient } from "@/lib/redis/client";
import { startLeasedInterval } from "./leased-interval";

/**
 * Runs the reaper every interval in whichever worker process holds the lease, so any number of
 * worker processes reap each job once: stopped runs resume from their cursor, rows the queue lost
 * are queued again, jobs an outside service ended are resumed (bounded), and only a job whose runs
 * kept stopping is ended (`onReaped`). A pass that throws is logged and the next one runs.
 */
export function startReaper(redis: RedisClient, log: Logger, onReaped?: (kind: string) => void): () => void {
  const schedule = {
    name: "reaper",
    intervalMs: reaperIntervalMs(),
    failure: "reaper pass failed; the next one will retry",
  };
  return startLeasedInterval(redis, log, schedule, async () => {
    const reaped = await reapStuckJobs();
    for (const r of reaped) {
      if (r.action === "stopped") {
        log.error(
          { jobId: r.id, kind: r.kind, why: r.message },
          "ended a job whose runs kept stopping without finishing",
        );
        onReaped?.(r.kind);
      } else {
        const what = {
          resumed: "resumed a stopped run from its cursor",
          requeued: "queued again a job the queue had lost",
          auto_resumed: "resumed a job an outside service had ended",
        }[r.action];
        log.warn({ jobId: r.id, kind: r.kind, why: r.message, action: r.action }, what);
      }
    }
    // Delayed jobs are never reaped (they wait for a rate-limit window), but one that missed
    // its wake-up by more than the grace is flagged: no worker consumes its queue, or none is free.
    for (const d of await listOverdueDelayedJobs()) {
      log.warn(
        {
          jobId: d.id,
          kind: d.kind,
          wakeUpAt: d.wakeUpAt,
          overdueMs: Math.round(d.overdueMs),
          queueState: d.queueState,
        },
        "a delayed job is past its wake-up time",
      );
    }
  });
}
