import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { processMetrics } from "@/lib/metrics/metrics";
import { waitFor } from "@/test/helpers/wait";
import { dislikeRetryUsed } from "./ads";
import { claim, heartbeatReserve, release } from "./reserves";
import { sweepReserves } from "./sweep";
import { books, dropQuotaTenants, quotaTenant } from "./test-fixtures";

afterAll(async () => {
  await dropQuotaTenants();
  await closeDb();
});

/** Production-like numbers on a controlled clock: window 25 min, lease 2 min, heartbeat 30 s. */
const MIN = 60_000;
const timing = { windowMs: 25 * MIN, leaseMs: 2 * MIN };
const at = (t0: number, ms: number) => new Date(t0 + ms);

async function reclaimedCount(kind: string): Promise<number> {
  const { values } = await processMetrics().registry.getSingleMetric("bounded_reserves_reclaimed_total")!.get();
  return values.find((v) => v.labels.kind === kind)?.value ?? 0;
}

describe("the sweeper never takes a live reserve", () => {
  it("a generation slower than the sweep window that still heartbeats keeps its reserve, then is charged once", async () => {
    const t = await quotaTenant("slow", 2);
    const t0 = Date.now() - 60 * MIN;
    const r = await claim({ tenantId: t.tenantId, kind: "dislike", subject: t.adIds[0]!, now: at(t0, 0) });
    // 40 minutes of heartbeats every 30 s, with the sweeper looking every minute.
    for (let ms = 30_000; ms <= 40 * MIN; ms += 30_000) {
      expect(await heartbeatReserve(r, at(t0, ms))).toBe(true);
      if (ms % MIN === 0) expect(await sweepReserves({ ...timing, now: at(t0, ms), tenantId: t.tenantId })).toEqual([]);
    }
    expect(await dislikeRetryUsed(t.adIds[0]!)).toBe(true);
    expect(await release(r, "succeeded", { now: at(t0, 40 * MIN + 1000) })).toEqual({ type: "spent" });
    expect(await books(t.packId)).toMatchObject({ remaining: 1, live: 0, spent: 1, reclaimed: 0, late: 0 });
  });

  it("a silent reserve younger than the window is left alone, even far past its lease", async () => {
    const t = await quotaTenant("young", 1);
    const t0 = Date.now() - 60 * MIN;
    await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]!, now: at(t0, 0) });
    expect(await sweepReserves({ ...timing, now: at(t0, 25 * MIN - 1), tenantId: t.tenantId })).toEqual([]);
    expect(await sweepReserves({ ...timing, now: at(t0, 25 * MIN + 1), tenantId: t.tenantId })).toHaveLength(1);
  });

  it("an old reserve whose heartbeat is within the lease is left alone; once the lease passes it is taken", async () => {
    const t = await quotaTenant("lease", 1);
    const t0 = Date.now() - 60 * MIN;
    const r = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]!, now: at(t0, 0) });
    await heartbeatReserve(r, at(t0, 30 * MIN));
    expect(await sweepReserves({ ...timing, now: at(t0, 32 * MIN - 1), tenantId: t.tenantId })).toEqual([]);
    expect(await sweepReserves({ ...timing, now: at(t0, 32 * MIN + 1), tenantId: t.tenantId })).toHaveLength(1);
  });
});

describe("an abandoned reserve is reclaimed whole", () => {
  it("a dislike whose process died is reclaimed after the window: unit refunded, flag cleared, counted, recorded", async () => {
    const t = await quotaTenant("dead", 3);
    const t0 = Date.now() - 60 * MIN;
    const r = await claim({ tenantId: t.tenantId, kind: "dislike", subject: t.adIds[0]!, jobId: null, now: at(t0, 0) });
    await heartbeatReserve(r, at(t0, 90_000)); // then the process dies
    expect(await dislikeRetryUsed(t.adIds[0]!)).toBe(true);
    const before = await reclaimedCount("dislike");
    const reclaimed = await sweepReserves({ ...timing, now: at(t0, 26 * MIN), tenantId: t.tenantId });
    expect(reclaimed).toEqual([
      expect.objectContaining({ reserveId: r.id, kind: "dislike", ageMs: 26 * MIN, silentMs: 26 * MIN - 90_000 }),
    ]);
    expect(await dislikeRetryUsed(t.adIds[0]!)).toBe(false);
    expect(await books(t.packId)).toMatchObject({ size: 3, remaining: 3, live: 0, spent: 0, reclaimed: 1 });
    expect(await reclaimedCount("dislike")).toBe(before + 1);
    expect(await db().reserveReclaim.findUniqueOrThrow({ where: { reserveId: r.id } })).toMatchObject({
      kind: "dislike",
      subject: t.adIds[0],
      reclaimedAt: at(t0, 26 * MIN),
    });
    // The customer still has the free regeneration the dead one never delivered.
    const again = await claim({ tenantId: t.tenantId, kind: "dislike", subject: t.adIds[0]! });
    await release(again, "failed");
  });

  it("in one transaction: when the reclaim cannot be recorded, the reserve, the unit and the flag stay as they were", async () => {
    const t = await quotaTenant("atomic", 2);
    const t0 = Date.now() - 60 * MIN;
    const r = await claim({ tenantId: t.tenantId, kind: "dislike", subject: t.adIds[0]!, now: at(t0, 0) });
    // A reclaim row for this reserve already exists, so recording it again fails at the last step.
    await db().reserveReclaim.create({
      data: {
        reserveId: r.id,
        packId: t.packId,
        tenantId: t.tenantId,
        kind: "dislike",
        subject: t.adIds[0]!,
        reservedAt: r.reservedAt,
        heartbeatAt: r.reservedAt,
        reclaimedAt: at(t0, 0),
      },
    });
    await expect(sweepReserves({ ...timing, now: at(t0, 30 * MIN), tenantId: t.tenantId })).rejects.toThrow();
    expect(await books(t.packId)).toMatchObject({ remaining: 1, live: 1 });
    expect(await dislikeRetryUsed(t.adIds[0]!)).toBe(true);
  });

  it("a heartbeat that lands between the sweeper's read and its delete keeps the reserve", async () => {
    const t = await quotaTenant("between", 1);
    const t0 = Date.now() - 60 * MIN;
    const r = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]!, now: at(t0, 0) });
    // Hold the reserve's row lock in a transaction that heartbeats it, while the sweeper runs.
    let sweep: Promise<unknown> | undefined;
    await db().$transaction(
      async (tx) => {
        await tx.quotaReserve.update({ where: { id: r.id }, data: { heartbeatAt: at(t0, 30 * MIN) } });
        const [{ pid }] = await tx.$queryRaw<[{ pid: number }]>`SELECT pg_backend_pid() AS pid`;
        let settled = false;
        sweep = sweepReserves({ ...timing, now: at(t0, 30 * MIN + 1000), tenantId: t.tenantId }).finally(
          () => (settled = true),
        );
        // Held until the sweeper has gone as far as it can: waiting on this row lock (its delete),
        // or done without needing it.
        await waitFor(
          async () =>
            settled ||
            (
              await db().$queryRaw<
                [{ n: number }]
              >`SELECT count(*)::int AS n FROM pg_stat_activity WHERE ${pid}::int = ANY(pg_blocking_pids(pid))`
            )[0].n > 0,
          { timeoutMs: 20_000, what: "the sweeper to wait on the reserve's row lock" },
        );
      },
      { timeout: 30_000 },
    );
    // The sweeper read the old heartbeat (the update was not committed) but its delete re-checks.
    expect(await sweep).toEqual([]);
    expect(await books(t.packId)).toMatchObject({ remaining: 0, live: 1 });
  });
});
