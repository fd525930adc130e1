import { afterAll, describe, expect, it } from "vitest";
import { closeDb } from "@/lib/db/client";
import { env } from "@/lib/env";
import { getReservesReport } from "@/lib/reports/reserves";
import { claim, heartbeatReserve, release } from "@/lib/quota/reserves";
import { sweepReserves } from "@/lib/quota/sweep";
import { dropQuotaTenants, quotaTenant } from "@/lib/quota/test-fixtures";

afterAll(async () => {
  await dropQuotaTenants();
  await closeDb();
});

describe("the /reserves report", () => {
  it("puts live reserve ages (production time) beside the computed worst case and the window, with reclaims and late releases", async () => {
    const scale = env().BOUNDED_TIME_SCALE;
    const now = new Date();
    const ago = (productionMs: number) => new Date(now.getTime() - productionMs * scale);
    const before = await getReservesReport(now);
    const t = await quotaTenant("report", 5);
    const slow = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]!, now: ago(20.5 * 60_000) });
    await heartbeatReserve(slow, now); // slower than the worst case, still alive
    const swept = await claim({ tenantId: t.tenantId, kind: "dislike", subject: t.adIds[0]!, now: ago(40 * 60_000) });
    await sweepReserves({ now, windowMs: 25 * 60_000 * scale, leaseMs: 2 * 60_000 * scale, tenantId: t.tenantId });
    await release(swept, "succeeded", { now });
    await release(await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! }), "succeeded");

    const r = await getReservesReport(now);
    expect(r.policy).toMatchObject({
      worstCaseMs: 960_000,
      margin: 1.5,
      neededMs: 1_440_000,
      windowMs: 1_500_000,
      problems: [],
    });
    expect(r.policy.terms.map((x) => x.totalMs)).toEqual([600_000, 240_000, 90_000, 30_000]);
    expect(r.live.count).toBe(before.live.count + 1);
    expect(r.live.buckets[20]!.generate).toBe(before.live.buckets[20]!.generate + 1);
    expect(r.live.pastWorstCase).toBe(before.live.pastWorstCase + 1);
    expect(r.reclaimed.hours).toHaveLength(24);
    expect(r.reclaimed.hours.at(-1)!.dislike).toBe(before.reclaimed.hours.at(-1)!.dislike + 1);
    expect(r.late.counts.charged).toBe(before.late.counts.charged + 1);
    // The pack: 5 units, one held by the slow generation, one charged by the late release, one spent.
    const pack = r.packs.rows.find((x) => x.tenant.startsWith("t-quota-report"));
    expect(pack).toMatchObject({ size: 5, remaining: 2, live: 1, spent: 2, openDebts: 0 });
    expect(r.packs.count).toBe(before.packs.count + 1);
    expect(r.packs.totals.size - before.packs.totals.size).toBe(5);
    expect(r.packs.totals.remaining - before.packs.totals.remaining).toBe(2);
    expect(r.packs.totals.spent - before.packs.totals.spent).toBe(2);
    expect(r.late.recent[0]).toMatchObject({
      reserveId: swept.id,
      kind: "dislike",
      outcome: "succeeded",
      resolution: "charged",
      tenant: expect.stringContaining("t-quota-report"),
    });
  });
});
