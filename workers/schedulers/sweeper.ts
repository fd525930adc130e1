import type { Logger } from "@/lib/log";
import { reserveTimings } from "@/lib/quota/settings";
import { sweepReserves, type Reclaimed } from "@/lib/quota/sweep";
import type { RedisClient } from "@/lib/redis/client";
import { startLeasedInterval } from "./leased-interval";

/**
 * Runs the quota sweeper every interval in whichever worker process holds the lease (as the
 * reaper does), so any number of worker processes sweep once. What it takes back is only ever a
 * reserve past the sweep window and silent beyond the lease (lib/quota/sweep.ts). A pass that
 * throws is logged and the next one runs.
 */
export function startReserveSweeper(
  redis: RedisClient,
  log: Logger,
  sweep: () => Promise<Reclaimed[]> = () => sweepReserves(),
): () => void {
  const { intervalMs, windowMs, leaseMs } = reserveTimings();
  log.info({ intervalMs, windowMs, leaseMs }, "reserve sweeper scheduled");
  const schedule = { name: "reserve-sweeper", intervalMs, failure: "reserve sweep failed; the next one will retry" };
  return startLeasedInterval(redis, log, schedule, async () => {
    for (const r of await sweep()) {
      log.warn(
        {
          reserveId: r.reserveId,
          kind: r.kind,
          tenantId: r.tenantId,
          adId: r.subject,
          jobId: r.jobId,
          ageMs: r.ageMs,
          silentMs: r.silentMs,
        },
        "reclaimed an abandoned quota reserve: unit refunded, its effects undone",
      );
    }
  });
}
