import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startImportHarness } from "@/test/helpers/import-harness";
import { forgetRollups, recordRollups } from "@/test/helpers/rollups";

// A job projected not to fit its budget splits itself at its start, with no operator, and its
// customer sees one job. Real database, real queue, the runtime and the model simulator.
vi.stubEnv("BOUNDED_AUTO_SPLIT", "1");
vi.stubEnv("BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT", "2");

let h: Awaited<ReturnType<typeof startImportHarness>>;
let queries: typeof import("@/lib/job-views/queries");
// 3,000 s soft: 3 s at the test time scale, where a row costs tens of milliseconds of real
// database and HTTP work — hundreds of times its share of a 3 s budget in production terms.
const SOFT_S = 3_000;
/** Hundreds of rows of real work each: on a machine busy with other test files they take well over the default 30 s. */
const WHOLE_IMPORTS_MS = 120_000;

beforeAll(async () => {
  h = await startImportHarness({ budgetSoftS: SOFT_S, budgetHardS: 4_500 });
  queries = await import("@/lib/job-views/queries");
});
afterAll(() => h.close());

const db = () => h.m.db.db();

/**
 * What a row really costs on this machine, measured by an import run here first: the projection
 * reads only these measurements (earlier runs' are removed), so parts are sized from the same
 * figures the assertions rely on, whatever the machine's speed.
 */
async function measureHere() {
  await forgetMeasures();
  const warmUp = await h.importOf(150, "fan-out-warm-up");
  await runToEnd(warmUp);
  // What the warm-up measured is read by the next start, not what its own start read.
  (await import("@/lib/projection/projection")).forgetKindReadings();
  expect(await db().job.findUniqueOrThrow({ where: { id: warmUp } })).toMatchObject({
    status: "completed",
    processed: 150,
  });
}

/** Earlier runs' measurements removed, and no start of this process reuses what it read of them. */
async function forgetMeasures() {
  await forgetRollups("csv_import", ["item", "model"]);
  (await import("@/lib/projection/projection")).forgetKindReadings();
}

/**
 * Runs a job as workers would until nothing of it is queued: the job, the continuation of a run
 * that ended its slice, its parts. The test's queue has no worker: each queued run is taken here.
 */
async function runToEnd(jobId: string): Promise<number> {
  let runs = 0;
  for (;;) {
    const open = await db().job.findMany({ where: { OR: [{ id: jobId }, { parentId: jobId }], status: "queued" } });
    if (open.length === 0) return runs;
    expect(runs++).toBeLessThan(20);
    for (const o of open) {
      await h.m.queues.queue("imports").remove(o.id);
      await h.run(o.id);
    }
  }
}

/** The open part of a split job (parts run one after another: at most one). */
async function openPart(jobId: string) {
  const open = await db().job.findMany({
    where: { parentId: jobId, status: { in: ["queued", "running", "delayed"] } },
  });
  expect(open.length).toBeLessThanOrEqual(1);
  return open[0] ?? null;
}

describe("automatic fan-out", () => {
  it(
    "a job projected not to fit becomes parts that run one after another and complete; its progress page shows one job with the total count and an expected finish",
    async () => {
      await measureHere();
      const rows = 400;
      const jobId = await h.importOf(rows, "fan-out");
      const job = await db().job.findUniqueOrThrow({ where: { id: jobId } });

      await h.run(jobId);
      const split = await db().job.findUniqueOrThrow({ where: { id: jobId }, include: { events: true } });
      // The job runs on as the sum of its parts, which cover its rows end to end.
      expect(split.status).toBe("running");
      const plan = (split.params as { split: { by: string; ranges: { from: number; to: number }[] } }).split;
      expect(plan.by).toBe("auto");
      expect(plan.ranges.length).toBeGreaterThanOrEqual(2);
      expect(plan.ranges[0]!.from).toBe(0);
      expect(plan.ranges.at(-1)!.to).toBe(rows);
      for (const [i, r] of plan.ranges.entries()) if (i > 0) expect(r.from).toBe(plan.ranges[i - 1]!.to);
      expect(split.events.find((e) => e.type === "split")?.message).toMatch(
        new RegExp(
          `^Projected not to fit its budget: 400 rows at ≈ .+ \\(items in flight\\)( \\+ .+ for the slowest)? ≈ .+; budget 50 min × 0\\.7 → ${plan.ranges.length} parts of ~\\d+ rows, one after another\\.$`,
        ),
      );
      // No row was done by the job itself: the parts do them all.
      expect(split.processed + split.failed).toBe(0);

      const parts = new Set<string>();
      let checked = false;
      for (let part = await openPart(jobId); part; part = await openPart(jobId)) {
        // A part waits in its tenant's line (its continuation after a slice, run here, has no queue job).
        if (!parts.has(part.id)) expect(await h.m.queues.queue("imports").getJobState(part.id)).toBe("prioritized");
        parts.add(part.id);
        await h.m.queues.queue("imports").remove(part.id);
        await h.run(part.id);
        if (!checked && (await db().job.findUniqueOrThrow({ where: { id: part.id } })).status === "completed") {
          checked = true;
          // One job for its customer: the whole count, the first part's share done, and an expected finish.
          const progress = await queries.getProgress(job.progressToken);
          expect(progress).toMatchObject({ status: "running", total: rows, processed: plan.ranges[0]!.to, failed: 0 });
          expect(progress!.etaSeconds).toBeGreaterThan(0);
          expect(progress!.expectedFinishAt).not.toBeNull();
        }
      }
      expect(checked).toBe(true);
      expect(parts.size).toBe(plan.ranges.length);

      const all = await db().job.findMany({ where: { parentId: jobId }, orderBy: { createdAt: "asc" } });
      // Each next part was made once the one before had sent out its last row, before that one had
      // finished: the provider does not idle through a part's tail.
      for (let i = 1; i < all.length; i++)
        expect(all[i]!.createdAt.getTime()).toBeLessThan(all[i - 1]!.finishedAt!.getTime());
      // Sized from what a row really costs here: no part ran out of its (default) budget.
      expect(all.map((p) => p.status)).toEqual(plan.ranges.map(() => "completed"));
      expect(new Set(all.map((p) => p.budgetSoftMs))).toEqual(new Set([SOFT_S * 1000]));
      const done = await db().job.findUniqueOrThrow({ where: { id: jobId } });
      expect(done).toMatchObject({ status: "completed", processed: rows, failed: 0 });
      const written = await db().$queryRaw<{ n: number; distinct: number }[]>`
      SELECT count(*)::int AS n, count(DISTINCT row)::int AS distinct FROM "Transaction" WHERE "jobId" IN (SELECT id FROM "Job" WHERE "parentId" = ${jobId}::uuid)`;
      expect(written[0]).toEqual({ n: rows, distinct: rows });
      expect(await queries.getProgress(job.progressToken)).toMatchObject({
        status: "completed",
        total: rows,
        processed: rows,
      });
    },
    WHOLE_IMPORTS_MS,
  );

  it("a job that fits keeps its projection on its row while it runs (for its progress page), and runs whole", async () => {
    await measureHere();
    const jobId = await h.importOf(10, "fan-out-fits");
    // The start as a worker makes it, stopped after the projection to look at the running row.
    const { startAttempt } = await import("@/lib/runs/attempt");
    const { fanOutIfTooBig } = await import("@/lib/runs/fan-out");
    const { flushProjections } = await import("@/lib/runs/projection-writes");
    const { handBack } = await import("@/lib/runs/finalize");
    const run = (await startAttempt(jobId))!;
    expect((await fanOutIfTooBig(run)).type).toBe("fits");
    await flushProjections();
    const running = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(running.status).toBe("running");
    const projection = (running.params as { projection: { itemsPerSecond: number; tailSeconds: number; ms: number } })
      .projection;
    expect(projection.itemsPerSecond).toBeGreaterThan(0);
    expect(projection.ms).toBeCloseTo((10 / projection.itemsPerSecond + projection.tailSeconds) * 1000, 0);
    expect(projection.ms).toBeLessThanOrEqual(0.7 * SOFT_S * 1000);

    expect(await handBack(jobId, run.attempt)).toBe(true);
    await runToEnd(jobId);
    expect(await db().job.findUniqueOrThrow({ where: { id: jobId } })).toMatchObject({
      status: "completed",
      processed: 10,
    });
    expect(await db().job.count({ where: { parentId: jobId } })).toBe(0);
  });

  it(
    "a run slower than its projection hands the rest to a new attempt before its deadline: the job completes, nothing timed out, every row once",
    async () => {
      // Figures that promise far more than this machine does: 10,000 rows measured at 1 ms (1 s in
      // production terms) say 600 rows fit easily; each really costs tens of milliseconds.
      await forgetMeasures();
      const at = new Date(Date.now() - 3_600_000);
      await recordRollups([
        { at, type: "item", queue: "imports", kind: "csv_import", model: "", count: 10_000, ms: 1 },
        { at, type: "model", queue: "imports", kind: "csv_import", model: "sim", count: 10_000, ms: 1 },
      ]);
      const rows = 600;
      const jobId = await h.importOf(rows, "fan-out-slices");
      expect(await runToEnd(jobId)).toBeGreaterThanOrEqual(2);
      const job = await db().job.findUniqueOrThrow({ where: { id: jobId }, include: { events: true } });
      expect(job).toMatchObject({ status: "completed", processed: rows, failed: 0 });
      // It ran out of slice at least once and was handed on; no run of it or of a part met its deadline.
      const events = await db().jobEvent.findMany({ where: { OR: [{ jobId }, { job: { parentId: jobId } }] } });
      expect(events.filter((e) => e.type === "handed_over").length).toBeGreaterThanOrEqual(1);
      expect(events.filter((e) => e.type === "timed_out" || e.type === "killed")).toEqual([]);
      const written = await db().$queryRaw<{ n: number; distinct: number }[]>`
      SELECT count(*)::int AS n, count(DISTINCT row)::int AS distinct FROM "Transaction"
      WHERE "jobId" = ${jobId}::uuid OR "jobId" IN (SELECT id FROM "Job" WHERE "parentId" = ${jobId}::uuid)`;
      expect(written[0]).toEqual({ n: rows, distinct: rows });
    },
    WHOLE_IMPORTS_MS,
  );
});
