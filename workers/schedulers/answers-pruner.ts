import { pruneExpiredAnswers } from "@/lib/answers/store";
import { env } from "@/lib/env";
import type { Logger } from "@/lib/log";
import type { RedisClient } from "@/lib/redis/client";
import { startLeasedInterval } from "./leased-interval";

/** An hour, scaled by `BOUNDED_TIME_SCALE` like every other wait of the workers. */
const PRUNE_INTERVAL_MS = 3_600_000;

/**
 * Deletes expired category answers every hour in whichever worker process holds the lease. An
 * expired answer is already a miss (lib/answers/store.ts); without this pass its row would stay.
 */
export function startAnswersPruner(
  redis: RedisClient,
  log: Logger,
  prune: () => Promise<number> = () => pruneExpiredAnswers(),
): () => void {
  const intervalMs = Math.max(1_000, PRUNE_INTERVAL_MS * env().BOUNDED_TIME_SCALE);
  const schedule = { name: "answers-pruner", intervalMs, failure: "pruning expired category answers failed" };
  return startLeasedInterval(redis, log, schedule, async () => {
    const removed = await prune();
    if (removed > 0) log.info({ removed }, "deleted expired category answers");
  });
}
