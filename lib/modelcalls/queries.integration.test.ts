import { randomUUID } from "node:crypto";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { deleteTenant } from "@/test/helpers/tenants";
import { latencyBucket } from "./buckets";
import { getLatencyHistogram, latencyHistogramQuerySchema, listP99Buckets, rollupSpan } from "./queries";

// Every test writes calls under its own queue name (and jobs under its own kind), so other tests
// and other people's runs against the same database never show up in the assertions.
const queues: string[] = [];
const tenants: string[] = [];

function uniqueQueue(label: string): string {
  const q = `test-${label}-${randomUUID().slice(0, 8)}`;
  queues.push(q);
  return q;
}

afterEach(async () => {
  for (const queue of queues.splice(0)) {
    await db().modelCall.deleteMany({ where: { queue } });
    await db().modelCallRollup.deleteMany({ where: { queue } });
    await db().modelCallRollupDay.deleteMany({ where: { queue } });
    await db().modelCallRollupWeek.deleteMany({ where: { queue } });
  }
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});

afterAll(async () => {
  await closeDb();
});

interface Call {
  at: Date;
  ms: number;
  outcome?: "ok" | "error" | "aborted";
  type?: "model" | "tool" | "ocr";
  model?: string;
}

async function insertCalls(queue: string, kind: string, calls: Call[]): Promise<void> {
  await db().modelCall.createMany({
    data: calls.map((c) => ({
      queue,
      jobKind: kind,
      model: c.model ?? (c.type === "tool" ? "lookup_invoice" : "sim-model"),
      type: c.type ?? "model",
      startedAt: c.at,
      durationMs: c.ms,
      outcome: c.outcome ?? "ok",
    })),
  });
}

const times = (n: number, call: Call): Call[] => Array.from({ length: n }, () => ({ ...call }));
const ago = (now: Date, ms: number) => new Date(now.getTime() - ms);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe("getLatencyHistogram reads the rollup", () => {
  it("counts per bucket and outcome, estimates p50/p90/p99 from cumulative counts, keeps the exact max", async () => {
    const now = new Date("2031-03-04T10:20:00.000Z");
    const queue = uniqueQueue("hist");
    const at = ago(now, 2 * HOUR);
    await insertCalls(queue, "csv_import", [
      ...times(50, { at, ms: 1_000 }),
      ...times(40, { at, ms: 5_000 }),
      ...times(4, { at, ms: 20_000 }),
      ...times(5, { at, ms: 20_000, outcome: "error" }),
      { at, ms: 100_000, outcome: "aborted" },
      // Another model in the same queue, and tool calls beside the model calls.
      ...times(3, { at, ms: 7_000, model: "other-model" }),
      ...times(10, { at, ms: 20, type: "tool" }),
      ...times(2, { at, ms: 35, type: "tool", outcome: "error" }),
      // An OCR call: neither a model call nor a tool call.
      { at, ms: 2_000, type: "ocr", model: "sim-ocr" },
    ]);

    const h = await getLatencyHistogram({ range: "24h", queue, model: "sim-model" }, now);
    expect(h.summary.total).toBe(100);
    expect(h.summary.byOutcome).toEqual({ ok: 94, error: 5, aborted: 1, superseded: 0 });
    expect(h.buckets).toHaveLength(34);
    expect(h.buckets[latencyBucket(1_000)]).toMatchObject({
      lowerMs: 1_000,
      count: 50,
      byOutcome: { ok: 50, error: 0, aborted: 0 },
    });
    expect(h.buckets[latencyBucket(20_000)]).toMatchObject({ count: 9, byOutcome: { ok: 4, error: 5, aborted: 0 } });
    expect(h.buckets.reduce((n, b) => n + b.count, 0)).toBe(100);
    expect(h.summary.p50?.bucket).toBe(latencyBucket(1_000));
    expect(h.summary.p90?.bucket).toBe(latencyBucket(5_000));
    expect(h.summary.p99?.bucket).toBe(latencyBucket(20_000));
    expect(h.summary.maxMs).toBe(100_000);
    expect(h.summary.meanMs).toBe(Math.round((50 * 1_000 + 40 * 5_000 + 9 * 20_000 + 100_000) / 100));

    expect(h.tools).toMatchObject({ total: 12, byOutcome: { ok: 10, error: 2, aborted: 0 }, maxMs: 35 });
    expect(h.tools.p50?.bucket).toBe(latencyBucket(20));

    expect(h.options.queues).toContain(queue);
    expect(h.options.models).toEqual(expect.arrayContaining(["sim-model", "other-model"]));
    expect(h.options.models).not.toContain("lookup_invoice");
    expect(h.filters).toEqual({ queue, kind: null, model: "sim-model" });

    // Without the model filter both models count; the OCR call only under type=ocr.
    expect((await getLatencyHistogram({ range: "24h", queue }, now)).summary.total).toBe(103);
    const ocr = await getLatencyHistogram({ range: "24h", queue, type: "ocr" }, now);
    expect(ocr.summary).toMatchObject({ total: 1, maxMs: 2_000 });
    expect(ocr.tools.total).toBe(12);
  });

  it("filters by kind and leaves out calls outside the range", async () => {
    const now = new Date("2031-03-04T10:20:00.000Z");
    const queue = uniqueQueue("range");
    await insertCalls(queue, "csv_import", [
      { at: ago(now, 10 * 60_000), ms: 3_000 },
      { at: ago(now, 3 * HOUR), ms: 3_000 },
      { at: ago(now, 3 * DAY), ms: 3_000 },
      { at: ago(now, 20 * DAY), ms: 3_000 },
      { at: ago(now, 40 * DAY), ms: 3_000 },
      { at: new Date(now.getTime() + 2 * DAY), ms: 3_000 }, // a clock ahead: not counted yet
    ]);
    await insertCalls(queue, "bulk_ocr", [{ at: ago(now, 10 * 60_000), ms: 9_000 }]);
    const total = async (range: "1h" | "24h" | "7d" | "30d") =>
      (await getLatencyHistogram({ range, queue, kind: "csv_import" }, now)).summary.total;
    expect([await total("1h"), await total("24h"), await total("7d"), await total("30d")]).toEqual([1, 2, 3, 4]);
    const both = await getLatencyHistogram({ range: "1h", queue }, now);
    expect(both.summary.total).toBe(2);
    expect(both.options.kinds).toEqual(expect.arrayContaining(["csv_import", "bulk_ocr"]));
  });

  it("1h reads the previous and the current hour row and says which window that was", async () => {
    const now = new Date("2031-03-04T10:20:00.000Z");
    const queue = uniqueQueue("hour");
    await insertCalls(queue, "csv_import", [
      { at: new Date("2031-03-04T09:00:00.000Z"), ms: 500 }, // 80 min ago, in the previous hour row: counted
      { at: new Date("2031-03-04T08:59:59.000Z"), ms: 500 }, // the hour before: not
    ]);
    const h = await getLatencyHistogram({ range: "1h", queue }, now);
    expect(h.summary.total).toBe(1);
    expect(h.window).toMatchObject({ from: "2031-03-04T09:00:00.000Z", to: now.toISOString(), coveredMinutes: 80 });
    expect(h.window.note).toMatch(/80 minutes/);
  });

  it("24h across midnight: the hours before it from the hour rows, the day since from the day row, the same calls", async () => {
    const now = new Date("2031-03-04T10:20:00.000Z");
    const queue = uniqueQueue("midnight");
    await insertCalls(queue, "csv_import", [
      { at: new Date("2031-03-03T09:59:59.000Z"), ms: 500 }, // before the window's first hour row: not
      { at: new Date("2031-03-03T10:00:00.000Z"), ms: 500 }, // the first hour row
      { at: new Date("2031-03-03T23:59:59.000Z"), ms: 700 }, // the last hour before midnight
      { at: new Date("2031-03-04T00:00:00.000Z"), ms: 900 }, // the day row from here on
      { at: new Date("2031-03-04T10:19:00.000Z"), ms: 90_000, outcome: "error" },
    ]);
    const h = await getLatencyHistogram({ range: "24h", queue }, now);
    expect(h.summary.total).toBe(4);
    expect(h.summary.maxMs).toBe(90_000);
    expect(h.buckets.reduce((n, b) => n + b.byOutcome.error, 0)).toBe(1);
    expect(h.window).toMatchObject({ from: "2031-03-03T10:00:00.000Z", coveredMinutes: 24 * 60 + 20 });
    // A window that does not reach midnight reads hour rows only.
    expect((await getLatencyHistogram({ range: "1h", queue }, now)).summary.total).toBe(1);
  });

  it("7d and 30d: whole weeks from the week rows, the days before the first Monday and of this week from the day rows", async () => {
    const now = new Date("2031-03-04T10:20:00.000Z"); // a Tuesday: 30 d from a Sunday, 7 d from a Tuesday
    const queue = uniqueQueue("weeks");
    await insertCalls(queue, "csv_import", [
      { at: new Date("2031-02-01T23:59:59.000Z"), ms: 500 }, // before the 30-day window: not
      { at: new Date("2031-02-02T00:00:00.000Z"), ms: 500 }, // its first day, a Sunday: a day row
      { at: new Date("2031-02-03T00:00:00.000Z"), ms: 500 }, // its first Monday: week rows from here on
      { at: new Date("2031-02-20T12:00:00.000Z"), ms: 500 },
      { at: new Date("2031-02-27T12:00:00.000Z"), ms: 500 }, // 30 d: a week row; 7 d (from Tuesday): a day row
      { at: new Date("2031-03-04T10:00:00.000Z"), ms: 90_000 }, // this week: day rows
      { at: new Date("2031-03-06T10:00:00.000Z"), ms: 500 }, // this week, a clock ahead: not counted yet
    ]);
    const total = async (range: "7d" | "30d") => (await getLatencyHistogram({ range, queue }, now)).summary.total;
    expect([await total("30d"), await total("7d")]).toEqual([5, 2]);

    // The whole weeks are read from the week rollup: without their day rows they still count…
    await db().modelCallRollupDay.deleteMany({
      where: { queue, day: { gte: new Date("2031-02-03T00:00:00.000Z"), lt: new Date("2031-02-25T00:00:00.000Z") } },
    });
    expect([await total("30d"), await total("7d")]).toEqual([5, 2]);
    // …this week from its day rows (its week row holds the call ahead of the clock)…
    await db().modelCallRollupWeek.deleteMany({ where: { queue, week: new Date("2031-03-03T00:00:00.000Z") } });
    expect([await total("30d"), await total("7d")]).toEqual([5, 2]);
    // …and a week counted from its row for 30 d is read from its day rows by 7 d, which starts inside it.
    await db().modelCallRollupWeek.deleteMany({ where: { queue, week: new Date("2031-02-24T00:00:00.000Z") } });
    expect([await total("30d"), await total("7d")]).toEqual([4, 2]);
  });

  it("an empty window has zero counts and no percentiles", async () => {
    const h = await getLatencyHistogram(
      { range: "7d", queue: uniqueQueue("empty") },
      new Date("2031-03-04T10:20:00.000Z"),
    );
    expect(h.summary).toMatchObject({ total: 0, p50: null, p90: null, p99: null, maxMs: null });
    expect(h.buckets.every((b) => b.count === 0)).toBe(true);
  });

  it("refuses ranges and types it does not know", () => {
    expect(latencyHistogramQuerySchema.safeParse({ range: "5y" }).success).toBe(false);
    expect(latencyHistogramQuerySchema.safeParse({ type: "human" }).success).toBe(false);
    expect(latencyHistogramQuerySchema.parse({ queue: "", kind: " " })).toEqual({ range: "24h", type: "model" });
  });
});

describe("rollupSpan: hour rows for the part-days, day rows for the days between", () => {
  const since = new Date("2031-02-25T13:40:00.000Z");
  const until = new Date("2031-03-04T10:20:00.000Z");
  const countIn = async (queue: string, from: Date, to: Date) => {
    const [row] = await db().$queryRaw<{ n: number | null }[]>`
      SELECT sum(count)::float8 AS n FROM ${rollupSpan(from, to)} r WHERE r.queue = ${queue}`;
    return row?.n ?? 0;
  };

  it("counts what the hour rollup counts over [the hour of since, until), whole days read from the day rollup", async () => {
    const queue = uniqueQueue("span");
    await insertCalls(queue, "csv_import", [
      { at: new Date("2031-02-25T12:59:59.000Z"), ms: 500 }, // before the first hour: not
      { at: new Date("2031-02-25T13:00:00.000Z"), ms: 500 }, // the first hour row
      { at: new Date("2031-02-25T23:59:59.000Z"), ms: 500 }, // the last hour before the first midnight
      { at: new Date("2031-02-26T00:00:00.000Z"), ms: 500 }, // the first whole day
      { at: new Date("2031-03-03T23:59:59.000Z"), ms: 60_000 }, // the last whole day
      { at: new Date("2031-03-04T00:00:00.000Z"), ms: 500 }, // the last midnight: hour rows again
      { at: new Date("2031-03-04T10:19:00.000Z"), ms: 500 }, // the hour of `until`
      { at: new Date("2031-03-04T11:00:00.000Z"), ms: 500 }, // after `until`, on its day: not
    ]);
    expect(await countIn(queue, since, until)).toBe(6);
    const [p99] = await listP99Buckets([{ kind: "csv_import", queue }], { since, until }, ["model"]);
    expect(p99).toMatchObject({ calls: 6, bucket: latencyBucket(60_000) });

    // The whole days come from the day rollup: without their hour rows they still count.
    await db().modelCallRollup.deleteMany({
      where: { queue, hour: { gte: new Date("2031-02-26T00:00:00.000Z"), lt: new Date("2031-03-04T00:00:00.000Z") } },
    });
    expect(await countIn(queue, since, until)).toBe(6);
    // A window inside one day reads hour rows only.
    expect(await countIn(queue, new Date("2031-03-04T00:30:00.000Z"), until)).toBe(2);
    // A window from a midnight starts with that day's row.
    expect(await countIn(queue, new Date("2031-02-26T00:00:00.000Z"), until)).toBe(4);
  });
});
