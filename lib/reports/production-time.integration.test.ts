import { randomUUID } from "node:crypto";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import {
  callListInProductionTime,
  forensicsInProductionTime,
  histogramInProductionTime,
} from "@/lib/reports/production-time";
import { bucketCallsQuery, getLatencyHistogram, listCalls } from "@/lib/modelcalls/queries";

const queue = `test-production-time-${randomUUID().slice(0, 8)}`;

afterEach(async () => {
  await db().modelCall.deleteMany({ where: { queue } });
  await db().modelCallRollup.deleteMany({ where: { queue } });
  await db().modelCallRollupDay.deleteMany({ where: { queue } });
  await db().modelCallRollupWeek.deleteMany({ where: { queue } });
});

afterAll(async () => {
  await closeDb();
});

describe("model-call latencies are shown in production time", () => {
  it("at time scale 0.1 a call recorded at 0.55 s is 5.5 s on the histogram, in its summary and in the bar's list", async () => {
    // A median production call (5.5 s) as a process at scale 0.1 measures it.
    await db().modelCall.createMany({
      data: Array.from({ length: 3 }, () => ({
        queue,
        jobKind: "csv_import",
        model: "sim-model",
        type: "model" as const,
        startedAt: new Date(),
        durationMs: 550,
        outcome: "ok" as const,
      })),
    });
    const recorded = await getLatencyHistogram({ range: "1h", queue });
    const h = histogramInProductionTime(recorded, 0.1);

    expect(h.summary.total).toBe(3);
    expect(h.summary.maxMs).toBe(5_500);
    expect(h.summary.meanMs).toBe(5_500);
    const p50 = h.summary.p50!;
    expect(p50.lowerMs).toBeLessThanOrEqual(5_500);
    expect(p50.upperMs).toBeGreaterThan(5_500);
    expect(p50.ms).toBeGreaterThan(4_000);
    // The bar that counts them has production edges, and keeps its index (its list still matches).
    const bar = h.buckets.find((b) => b.count === 3)!;
    expect(bar.lowerMs).toBeLessThanOrEqual(5_500);
    expect(bar.upperMs).toBeGreaterThan(5_500);
    expect(bar.bucket).toBe(recorded.buckets.find((b) => b.count === 3)!.bucket);

    const list = callListInProductionTime(await listCalls(bucketCallsQuery(h, bar.bucket)!), 0.1);
    expect(list.calls.map((c) => c.durationMs)).toEqual([5_500, 5_500, 5_500]);
    expect(list.bucket).toMatchObject({ lowerMs: bar.lowerMs, upperMs: bar.upperMs });

    // At scale 1 nothing changes.
    expect(histogramInProductionTime(recorded, 1)).toEqual(recorded);
  });

  it("a job's timeline shows its calls, their median and their maximum in production time", () => {
    const at = new Date().toISOString();
    const f = forensicsInProductionTime(
      {
        jobId: "j",
        calls: [{ type: "model", calls: 2, errors: 0, aborted: 0, superseded: 0, p50Ms: 550, maxMs: 3_500, items: 2 }],
        callsTotal: 2,
        callsShown: 2,
        reschedules: 0,
        attempts: 1,
        reaped: 0,
        entries: [
          { kind: "event", at, category: "attempt", type: "started", attempt: 1, message: "", part: null },
          {
            kind: "call",
            at,
            id: "1",
            type: "model",
            model: "m",
            durationMs: 550,
            outcome: "ok",
            error: null,
            batchSize: 1,
            part: null,
          },
        ],
        eventsTruncated: false,
      },
      0.1,
    );
    expect(f.calls[0]).toMatchObject({ p50Ms: 5_500, maxMs: 35_000 });
    expect(f.entries[1]).toMatchObject({ kind: "call", durationMs: 5_500 });
    expect(f.entries[0]).toMatchObject({ kind: "event", type: "started" });
  });
});
