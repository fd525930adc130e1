import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { BUCKET_COUNT, LAST_BUCKET, bucketFirstMs } from "./buckets";
import { bucketCallsQuery, callListQuerySchema, getLatencyHistogram, listCalls } from "./queries";

// A kind of its own, so the histogram and the lists count only these calls.
const kind = `k-calls-${randomBytes(4).toString("hex")}`;
const now = new Date();
const HOUR = 3_600_000;

afterAll(async () => {
  await db().modelCall.deleteMany({ where: { jobKind: kind } });
  await db().modelCallRollup.deleteMany({ where: { jobKind: kind } });
  await db().modelCallRollupDay.deleteMany({ where: { jobKind: kind } });
  await db().modelCallRollupWeek.deleteMany({ where: { jobKind: kind } });
  await closeDb();
});

/** Durations on both sides of bucket edges, the two clamped ends included. */
function edgeDurations(): number[] {
  const out = [0, 3, 9, 10];
  for (const b of [1, 2, 6, 12, 18, 20, 24, 30, LAST_BUCKET])
    out.push(bucketFirstMs(b) - 1, bucketFirstMs(b), bucketFirstMs(b) + 1);
  out.push(4_000_000, 20_000_000);
  return out;
}

describe("a histogram bar and the list of its calls", () => {
  it("lists exactly the calls each bar counts: same bucket edges, same window", async () => {
    const durations = edgeDurations();
    const outcomes = ["ok", "error", "aborted"] as const;
    const rows = durations.flatMap((durationMs, i) => [
      // Inside the 24 h window, at various ages.
      { startedAt: new Date(now.getTime() - ((i * 37) % 23) * HOUR - 1_000), durationMs, outcome: outcomes[i % 3]! },
      // Started before the window's first hour: counted in neither.
      {
        startedAt: new Date(Math.floor((now.getTime() - 24 * HOUR) / HOUR) * HOUR - 60_000),
        durationMs,
        outcome: "ok" as const,
      },
    ]);
    // Another type in the same kind: not in the model-call bars.
    rows.push({ startedAt: new Date(now.getTime() - 5_000), durationMs: 20, outcome: "ok" });
    await db().modelCall.createMany({
      data: rows.map((r, i) => ({
        ...r,
        type: i === rows.length - 1 ? "tool" : "model",
        model: "sim-model",
        queue: "imports",
        jobKind: kind,
        batchSize: 1,
      })),
    });

    const h = await getLatencyHistogram({ range: "24h", kind, type: "model" }, now);
    expect(h.summary.total).toBe(durations.length);
    let listed = 0;
    for (let b = 0; b < BUCKET_COUNT; b++) {
      const query = bucketCallsQuery(h, b)!;
      // The query goes through the address bar: strings in, parsed by the page's schema.
      const list = await listCalls(callListQuerySchema.parse({ ...query, limit: "200" }));
      expect(list.total, `bucket ${b}`).toBe(h.buckets[b]!.count);
      expect(list.calls.length, `bucket ${b}`).toBe(h.buckets[b]!.count);
      listed += list.total;
    }
    expect(listed).toBe(durations.length);
    // The daily rollup (week view) agrees too.
    const week = await getLatencyHistogram({ range: "7d", kind, type: "model" }, now);
    for (const b of [0, 1, 12, LAST_BUCKET]) {
      expect((await listCalls(bucketCallsQuery(week, b)!)).total, `7d bucket ${b}`).toBe(week.buckets[b]!.count);
    }
  });

  it("pages through a bar newest first, each call once", async () => {
    const h = await getLatencyHistogram({ range: "24h", kind, type: "model" }, now);
    const b = h.buckets.findIndex((x) => x.count >= 3);
    const seen: string[] = [];
    let after: string | undefined;
    for (let i = 0; i < 10; i++) {
      const page = await listCalls({ ...bucketCallsQuery(h, b)!, limit: 2, after });
      seen.push(...page.calls.map((c) => `${c.startedAt}|${c.id}`));
      if (!page.nextAfter) break;
      after = page.nextAfter;
    }
    expect(seen).toHaveLength(h.buckets[b]!.count);
    expect(new Set(seen).size).toBe(seen.length);
    expect([...seen].sort().reverse()).toEqual(seen);
  });

  it("has no list for whole items, and refuses a window that ends before it starts", () => {
    expect(
      bucketCallsQuery(
        {
          type: "item",
          filters: { queue: null, kind: null, model: null },
          window: { from: "", to: "", coveredMinutes: 0, note: null },
        },
        3,
      ),
    ).toBeNull();
    expect(callListQuerySchema.safeParse({ from: "2026-12-03T10:00:00Z", to: "2026-12-03T09:00:00Z" }).success).toBe(
      false,
    );
    expect(callListQuerySchema.safeParse({ bucket: "34" }).success).toBe(false);
    expect(callListQuerySchema.safeParse({ after: "1; drop" }).success).toBe(false);
  });
});
