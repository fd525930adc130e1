import type { Logger } from "@/lib/log";
import { key, type RedisClient } from "@/lib/redis/client";

export interface LeasedIntervalOptions {
  /** Names the lease (`key(name, "lease")`): the processes that share a name run each pass once between them. */
  name: string;
  intervalMs: number;
  /** What the error log says when a pass throws. */
  failure: string;
}

/**
 * Runs `pass` every interval in whichever worker process takes the lease for it, so any number of
 * worker processes run each pass once. The lease ends a little before the next tick (never under
 * 0.5 s), so the next pass is open to any process again. In one process a pass never overlaps the
 * previous one; a pass that throws is logged and the next one runs. Returns a function that stops it.
 */
export function startLeasedInterval(
  redis: RedisClient,
  log: Logger,
  options: LeasedIntervalOptions,
  pass: () => Promise<void>,
): () => void {
  const { intervalMs, failure } = options;
  const lease = key(options.name, "lease");
  const owner = `${process.pid}:${Math.random().toString(36).slice(2)}`;
  let running = false;
  const timer = setInterval(async () => {
    if (running) return;
    running = true;
    try {
      const got = await redis.set(lease, owner, "PX", Math.max(intervalMs - 100, 500), "NX");
      if (got !== "OK") return;
      await pass();
    } catch (err) {
      log.error({ err }, failure);
    } finally {
      running = false;
    }
  }, intervalMs);
  return () => clearInterval(timer);
}
