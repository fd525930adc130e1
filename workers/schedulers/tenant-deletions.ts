import { continueTenantDeletions } from "@/lib/actions/tenant-deletion";
import { env } from "@/lib/env";
import type { Logger } from "@/lib/log";
import type { RedisClient } from "@/lib/redis/client";
import { startLeasedInterval } from "./leased-interval";

/**
 * Goes on with every started tenant deletion (lib/actions/tenant-deletion.ts) every
 * `BOUNDED_TENANT_DELETION_EVERY_S` in whichever worker process holds the lease: a deletion its
 * request left unfinished (a large tenant), or that a crash or a PostgreSQL restart interrupted,
 * is finished by the passes, a batch at a time. A pass stops at 80 % of the interval, so the next
 * one (perhaps in another process, once the lease has ended) never runs beside it.
 */
export function startTenantDeletions(redis: RedisClient, log: Logger): () => void {
  const intervalMs = env().BOUNDED_TENANT_DELETION_EVERY_S * 1000;
  const schedule = { name: "tenant-deletions", intervalMs, failure: "the tenant deletion pass failed" };
  return startLeasedInterval(redis, log, schedule, async () => {
    for (const d of await continueTenantDeletions({ until: performance.now() + intervalMs * 0.8 }))
      log.info(
        { tenant: d.tenant, done: d.done, removed: d.removed, redisKeys: d.redisKeys, error: d.error },
        d.done ? "tenant deleted" : "tenant deletion goes on",
      );
  });
}
