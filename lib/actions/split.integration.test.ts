import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { startImportHarness } from "@/test/helpers/import-harness";
import { recordRollups } from "@/test/helpers/rollups";

// These tests stop runs at chosen rows and count model requests one per row: they run the rows
// one after another (items in flight are covered by for-each-item.property.integration.test.ts
// and the concurrent import tests).
vi.stubEnv("BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT", "1");

// Split against the real database, the real queue and the runtime with the model simulator.
const operator: Principal = {
  userId: "00000000-0000-0000-0000-000000000001",
  username: "oncall",
  role: "operator",
  via: "session",
};
let h: Awaited<ReturnType<typeof startImportHarness>>;
let split: typeof import("./split");
let retry: typeof import("./retry");
let queries: typeof import("@/lib/job-views/queries");
let stuck: typeof import("@/lib/reports/stuck");
let reaper: typeof import("@/lib/runs/reaper");
let errors: typeof import("@/lib/core/signals");

beforeAll(async () => {
  h = await startImportHarness();
  split = await import("./split");
  retry = await import("./retry");
  queries = await import("@/lib/job-views/queries");
  stuck = await import("@/lib/reports/stuck");
  reaper = await import("@/lib/runs/reaper");
  errors = await import("@/lib/core/signals");
});
afterAll(() => h.close());

const db = () => h.m.db.db();

/** An import that ran until `stopAt` rows were done, then timed out. */
async function timedOut(rows: number, stopAt: number): Promise<string> {
  const jobId = await h.importOf(rows, "split");
  const stop = new AbortController();
  const watching = setInterval(async () => {
    const { cursor } = await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { cursor: true } });
    if (cursor >= stopAt) stop.abort(new errors.WorkerShutdown("stop"));
  }, 5);
  await h.run(jobId, stop.signal);
  clearInterval(watching);
  await db().job.update({ where: { id: jobId }, data: { status: "timed_out", message: "Timed out" } });
  return jobId;
}

/** Runs the parts as workers would (the test's queue has no worker), in the given order. */
async function runParts(ids: string[]) {
  for (const id of ids) {
    await h.m.queues.queue("imports").remove(id);
    await h.run(id);
  }
}

// A window of its own, far from every other test's measurements: items of 900 ms recorded at the
// test time scale (0.001) are 900 s each in production time.
// Each run picks its own week between 1990 and 2009, so runs on one database never see each other's figures.
const WINDOW_NOW = new Date(Date.UTC(1990, 0, 10) + Math.floor(Math.random() * 7000) * 86_400_000);
async function recordItems(kind: string, items: number, durationMs: number, calls: number) {
  const at = new Date(WINDOW_NOW.getTime() - 2 * 86_400_000);
  await recordRollups([
    { at, type: "item", queue: "imports", kind, model: "", count: items, ms: durationMs },
    { at, type: "model", queue: "imports", kind, model: "sim", count: calls, ms: durationMs },
  ]);
}

/** The parts of a split job made so far, in order. */
async function partsOf(jobId: string) {
  return db().job.findMany({ where: { parentId: jobId }, orderBy: { createdAt: "asc" } });
}

describe("planSplit", () => {
  it("sizes the parts from the projected rate of whole items and the soft budget × 0.7, and shows the arithmetic", async () => {
    await recordItems("csv_import", 200, 900, 100);
    const jobId = await h.importOf(1432, "split-plan");
    await db().job.update({ where: { id: jobId }, data: { status: "timed_out" } });

    const r = await split.planSplit(jobId, {}, WINDOW_NOW);
    expect(r.type).toBe("plan");
    if (r.type !== "plan") return;
    const p = r.plan;
    // One row in flight (this file's setting) at 900 s a row, every row alike (no tail):
    // 600,000 s × 0.7 ÷ 900 s = 466 rows a part → 1,432 rows in 4 parts.
    expect(p).toMatchObject({ remaining: 1432, softMs: 600_000_000, itemsPerPart: 466, suggestedParts: 4, parts: 4 });
    expect(p.projection).toMatchObject({ source: "measured", limit: "items in flight", inFlight: 1, tailMs: 0 });
    expect(p.partSizes).toEqual([358, 358, 358, 358]);
    expect(p.ranges).toEqual([
      { from: 0, to: 358 },
      { from: 358, to: 716 },
      { from: 716, to: 1074 },
      { from: 1074, to: 1432 },
    ]);
    expect(p.arithmetic).toBe(
      "1,432 rows at ≈ one row every 15 min (items in flight) ≈ 358 h; budget 166 h 40 min × 0.7 → 4 parts of ~358 rows, one after another",
    );
    expect(p.projection.basis).toBe("measured from 200 rows and 100 calls in the last 7 days");

    // The operator's k, with the suggestion kept beside it, and what a too-small k means.
    const chosen = await split.planSplit(jobId, { parts: 10 }, WINDOW_NOW);
    expect(chosen.type === "plan" && chosen.plan.arithmetic).toMatch(
      /→ 4 parts suggested; you chose 10 parts of ~144 rows, one after another$/,
    );
    expect(chosen.type === "plan" && chosen.plan.partSizes.reduce((a, b) => a + b)).toBe(1432);
    const few = await split.planSplit(jobId, { parts: 2 }, WINDOW_NOW);
    expect(few.type === "plan" && few.plan.arithmetic).toMatch(
      /a part of ~716 rows may need longer than its 166 h 40 min budget \(about 466 fit\)$/,
    );
  });

  it("uses the kind's stated defaults when too few items were measured", async () => {
    const jobId = await h.importOf(10, "split-plan");
    await db().job.update({ where: { id: jobId }, data: { status: "failed", cursor: 4, processed: 4 } });
    const r = await split.planSplit(jobId, {}, new Date("1999-01-01T00:00:00Z"));
    expect(r).toMatchObject({
      type: "plan",
      plan: {
        projection: { source: "default", tailMs: 47_000 },
        remaining: 6,
        done: 4,
        parts: 2,
        ranges: [
          { from: 4, to: 7 },
          { from: 7, to: 10 },
        ],
      },
    });
    expect(r.type === "plan" && r.plan.projection.basis).toMatch(
      /^defaults \(a batch of 8 rows is one model call.*\): fewer than 100 rows measured/,
    );
  });

  it("refuses what cannot be split, with the reason", async () => {
    const jobId = await h.importOf(3, "split-plan");
    for (const status of ["queued", "running", "completed"] as const) {
      await db().job.update({ where: { id: jobId }, data: { status } });
      expect(await split.planSplit(jobId)).toMatchObject({ type: "not_splittable", status });
    }
    await db().job.update({ where: { id: jobId }, data: { status: "timed_out", cursor: 2 } });
    expect(await split.planSplit(jobId)).toMatchObject({
      type: "not_splittable",
      message: "Only 1 row left: retry it instead.",
    });
    await db().job.update({ where: { id: jobId }, data: { kind: "agent_run" } });
    expect(await split.planSplit(jobId)).toMatchObject({
      type: "not_splittable",
      message: expect.stringContaining("cannot be split"),
    });
    expect(await split.planSplit("nope")).toEqual({ type: "not_found" });
  });
});

describe("splitJob", () => {
  it("divides the remaining rows into parts that run one after another; the job ends completed with every row written once and its progress page at 100 %", async () => {
    const jobId = await timedOut(60, 20);
    const before = await db().job.findUniqueOrThrow({ where: { id: jobId } });

    const r = await split.splitJob(jobId, operator, { parts: 3 });
    expect(r.type).toBe("split");
    if (r.type !== "split") return;
    expect(r.plan.ranges).toHaveLength(3);
    // Only the first part exists: each of the others is made when the one before it completes.
    expect(r.children).toHaveLength(1);
    const parent = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(parent).toMatchObject({ status: "running", attempt: before.attempt + 1 });

    const seen: string[] = [];
    for (let i = 0; i < 3; i++) {
      const parts = await partsOf(jobId);
      expect(parts).toHaveLength(i + 1);
      const open = parts.filter((p) => !seen.includes(p.id));
      expect(open).toHaveLength(1);
      expect(open[0]).toMatchObject({ status: "queued", tenantId: before.tenantId });
      // The part waits in the queue, in its tenant's line.
      expect(await h.m.queues.queue("imports").getJobState(open[0]!.id)).toBe("prioritized");
      seen.push(open[0]!.id);
      if (i < 2) expect((await db().job.findUniqueOrThrow({ where: { id: jobId } })).status).toBe("running");
      await runParts([open[0]!.id]);
    }
    const parts = await partsOf(jobId);
    expect(parts.map((p) => p.total).reduce((a, b) => a! + b!, 0)).toBe(60 - before.cursor);
    expect(new Set(parts.map((p) => p.progressToken)).size).toBe(3);

    const after = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(after).toMatchObject({ status: "completed", processed: 60, failed: 0 });
    expect(after.message).toBe("Finished: 60 of 60 rows done.");
    const rows = await db().$queryRaw<{ n: number; distinct: number; min: number; max: number }[]>`
      SELECT count(*)::int AS n, count(DISTINCT row)::int AS distinct, min(row) AS min, max(row) AS max
      FROM "Transaction" WHERE "jobId" = ${jobId}::uuid OR "jobId" IN (SELECT id FROM "Job" WHERE "parentId" = ${jobId}::uuid)`;
    expect(rows[0]).toEqual({ n: 60, distinct: 60, min: 2, max: 61 });

    const progress = await queries.getProgress(parent.progressToken);
    expect(progress).toMatchObject({ status: "completed", total: 60, processed: 60, failed: 0 });
  });

  it("the latest part starts the next one early, once; an earlier part cannot", async () => {
    const jobId = await timedOut(12, 2);
    const r = await split.splitJob(jobId, operator, { parts: 3 });
    if (r.type !== "split") throw new Error(r.type);
    const parts = await import("@/lib/jobs/parts");
    const early = await Promise.all(
      Array.from({ length: 5 }, () => parts.startNextPartEarly({ parentId: jobId, index: 1 })),
    );
    expect(early.filter(Boolean)).toHaveLength(1);
    expect(await partsOf(jobId)).toHaveLength(2);
    expect(await parts.startNextPartEarly({ parentId: jobId, index: 1 })).toBe(false);
    expect(await parts.startNextPartEarly({ parentId: jobId, index: 2 })).toBe(true);
    expect(await parts.startNextPartEarly({ parentId: jobId, index: 3 })).toBe(false);
    expect(await partsOf(jobId)).toHaveLength(3);
    for (const c of await partsOf(jobId)) await h.m.queues.queue("imports").remove(c.id);
  });

  it("a split whose first part cannot be queued did not happen: the job is as it was, with no part and no plan, and can be split later", async () => {
    const jobId = await timedOut(12, 2);
    // A job that holds no params (one abandoned before its first start carries no projection).
    await db().job.update({ where: { id: jobId }, data: { params: h.m.db.Prisma.DbNull } });
    const before = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    vi.spyOn(h.m.queues.queue("imports"), "add").mockRejectedValueOnce(new Error("Connection is closed."));
    expect(await split.splitJob(jobId, operator, { parts: 2 })).toMatchObject({ type: "queue_unavailable" });
    const after = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(after.status).toBe("timed_out");
    expect(after.params).toEqual(before.params);
    expect(await db().job.count({ where: { parentId: jobId } })).toBe(0);
    expect(await split.splitJob(jobId, operator, { parts: 2 })).toMatchObject({ type: "split" });
    for (const c of await partsOf(jobId)) await h.m.queues.queue("imports").remove(c.id);
  });

  it("twenty concurrent splits of one job make one split", async () => {
    const jobId = await timedOut(12, 2);
    const results = await Promise.all(Array.from({ length: 20 }, () => split.splitJob(jobId, operator, { parts: 2 })));
    expect(results.filter((r) => r.type === "split")).toHaveLength(1);
    expect(await db().job.count({ where: { parentId: jobId } })).toBe(1);
    for (const c of await db().job.findMany({ where: { parentId: jobId }, select: { id: true } }))
      await h.m.queues.queue("imports").remove(c.id);
  });

  it("a part that fails never leaves the job waiting: it ends with the worst part's status, and reopens when that part is retried", async () => {
    const jobId = await timedOut(9, 3);
    const r = await split.splitJob(jobId, operator, { parts: 2 });
    if (r.type !== "split") throw new Error(r.type);
    await runParts([r.children[0]!.jobId]);
    const second = (await partsOf(jobId))[1]!;
    // The second part times out, as a part whose budget ran out would.
    await db().job.update({ where: { id: second.id }, data: { status: "running", attempt: 1 } });
    const h2 = await import("@/lib/runs/finalize");
    await h2.finalizeJob(second.id, 1, { status: "timed_out", message: "Timed out after 0 of 3 rows" });
    const ended = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(ended.status).toBe("timed_out");
    // How many rows the first run did before it stopped varies by a row or two: the message names the committed count.
    expect(ended.message).toBe(
      `1 of 2 parts timed out (1 completed); ${ended.processed + ended.failed} of 9 rows done. Retry those parts from the job page.`,
    );
    expect(ended.processed + ended.failed).toBeLessThan(9);
    // The job itself is not retried or split again: its parts are.
    expect(await retry.retryJob(jobId, operator)).toMatchObject({ type: "not_retryable" });
    expect(await split.planSplit(jobId)).toMatchObject({ type: "not_splittable" });

    expect(await retry.retryJob(second.id, operator)).toMatchObject({ type: "retried" });
    expect((await db().job.findUniqueOrThrow({ where: { id: jobId } })).status).toBe("running");
    await runParts([second.id]);
    expect(await db().job.findUniqueOrThrow({ where: { id: jobId } })).toMatchObject({
      status: "completed",
      processed: 9,
    });
  });

  it("the reaper leaves a split job to its parts, makes the next part when the one before ended without doing so, and settles the job at the end", async () => {
    const jobId = await timedOut(6, 1);
    const r = await split.splitJob(jobId, operator, { parts: 2 });
    if (r.type !== "split") throw new Error(r.type);
    // Long silent, far past any hard limit: a row of its own would be reaped.
    await db().job.update({
      where: { id: jobId },
      data: { heartbeatAt: new Date(Date.now() - 86_400_000), budgetHardMs: 1 },
    });
    await reaper.reapStuckJobs();
    expect((await db().job.findUniqueOrThrow({ where: { id: jobId } })).status).toBe("running");
    expect((await stuck.listStuckJobs()).map((j) => j.id)).not.toContain(jobId);

    // A part that ended behind its back (settling interrupted): the next pass makes the next part…
    await db().job.updateMany({ where: { parentId: jobId }, data: { status: "completed" } });
    await h.m.queues.queue("imports").remove(r.children[0]!.jobId);
    await reaper.reapStuckJobs();
    expect(await partsOf(jobId)).toHaveLength(2);
    expect((await db().job.findUniqueOrThrow({ where: { id: jobId } })).status).toBe("running");
    // …and, once that one has ended too, settles the job.
    await db().job.updateMany({ where: { parentId: jobId }, data: { status: "completed" } });
    for (const c of await partsOf(jobId)) await h.m.queues.queue("imports").remove(c.id);
    await reaper.reapStuckJobs();
    expect((await db().job.findUniqueOrThrow({ where: { id: jobId } })).status).toBe("completed");
  });
});
