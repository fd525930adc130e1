import { afterAll, describe, expect, it } from "vitest";
import { closeDb } from "@/lib/db/client";
import { logger } from "@/lib/log";
import { claim } from "@/lib/quota/reserves";
import { reserveTimings } from "@/lib/quota/settings";
import { sweepReserves } from "@/lib/quota/sweep";
import { books, dropQuotaTenants, quotaTenant } from "@/lib/quota/test-fixtures";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { startReserveSweeper } from "./sweeper";

afterAll(async () => {
  await dropQuotaTenants();
  await closeRedis();
  await closeDb();
});

describe("the reserve sweeper in the worker process", () => {
  it("takes back an abandoned reserve on its own, once, whichever of two processes holds the lease", async () => {
    const t = await quotaTenant("sched", 2);
    const { windowMs, leaseMs, intervalMs } = reserveTimings();
    const longAgo = new Date(Date.now() - 10 * (windowMs + leaseMs));
    await claim({ tenantId: t.tenantId, kind: "dislike", subject: t.adIds[0]!, now: longAgo });
    const live = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! });
    const redis = createRedis("worker");
    const passes: number[] = [];
    const sweep = async () => {
      const r = await sweepReserves({ tenantId: t.tenantId });
      passes.push(r.length);
      return r;
    };
    const stops = [
      startReserveSweeper(redis, logger("test"), sweep),
      startReserveSweeper(redis, logger("test"), sweep),
    ];
    try {
      await expect
        .poll(() => books(t.packId), { timeout: 10 * intervalMs + 5000, interval: 100 })
        .toMatchObject({ remaining: 1, live: 1, reclaimed: 1 });
      expect(passes.reduce((a, b) => a + b, 0)).toBe(1);
      expect(live.id).toBeTruthy();
    } finally {
      for (const stop of stops) stop();
      await redis.quit();
    }
  });
});
