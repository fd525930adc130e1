import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { startImportHarness } from "@/test/helpers/import-harness";

// These tests stop runs at chosen rows and count model requests one per row: they run the rows
// one after another (items in flight are covered by for-each-item.property.integration.test.ts
// and the concurrent import tests).
vi.stubEnv("BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT", "1");

// Retry against the real database, the real queue and the runtime with the model simulator.
const operator: Principal = {
  userId: "00000000-0000-0000-0000-000000000001",
  username: "oncall",
  role: "operator",
  via: "session",
};
let h: Awaited<ReturnType<typeof startImportHarness>>;
let retry: typeof import("./retry");
let errors: typeof import("@/lib/core/signals");

beforeAll(async () => {
  h = await startImportHarness();
  retry = await import("./retry");
  errors = await import("@/lib/core/signals");
});
afterAll(() => h.close());

const db = () => h.m.db.db();

describe("retryJob", () => {
  it("twenty concurrent retries of one job create exactly one new attempt", async () => {
    const jobId = await h.importOf(3, "retry");
    await db().job.update({ where: { id: jobId }, data: { status: "timed_out", attempt: 1, cursor: 1, processed: 1 } });

    const results = await Promise.all(Array.from({ length: 20 }, () => retry.retryJob(jobId, operator)));

    expect(results.filter((r) => r.type === "retried")).toHaveLength(1);
    expect(results.filter((r) => r.type === "not_retryable")).toHaveLength(19);
    const events = await db().jobEvent.findMany({ where: { jobId, type: "retry" } });
    expect(events).toHaveLength(1);
    const queued = await h.m.queues.queue("imports").getJob(jobId);
    expect(queued?.data).toEqual({ jobId, kind: "csv_import" });
    // A retry waits ahead of every fresh job (lib/queues/fairness.ts).
    expect(await queued?.getState()).toBe("prioritized");
    expect(queued?.priority).toBe(1);

    await h.m.queues.queue("imports").remove(jobId);
    await h.run(jobId);
    const row = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(row).toMatchObject({ status: "completed", attempt: 2 });
  });

  it("resumes at the cursor: rows done before the timeout are not redone and no Transaction is written twice", async () => {
    const jobId = await h.importOf(60, "retry");
    // The first run is stopped after ~20 rows, as a soft limit would.
    const first = new AbortController();
    const watching = setInterval(async () => {
      const { cursor } = await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { cursor: true } });
      if (cursor >= 20) first.abort(new errors.WorkerShutdown("stop"));
    }, 5);
    await h.run(jobId, first.signal);
    clearInterval(watching);
    await db().job.update({ where: { id: jobId }, data: { status: "timed_out" } });
    const before = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(before.cursor).toBeGreaterThanOrEqual(20);
    expect(before.cursor).toBeLessThan(60);

    const retriedAt = new Date();
    const retried = await retry.retryJob(jobId, operator);
    expect(retried).toMatchObject({ type: "retried", resumesAt: before.cursor });
    await h.m.queues.queue("imports").remove(jobId);
    await h.run(jobId);

    const after = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(after).toMatchObject({ status: "completed", processed: 60, cursor: 60, attempt: before.attempt + 1 });
    const dupes = await db().$queryRaw<
      { row: number }[]
    >`SELECT row FROM "Transaction" WHERE "jobId" = ${jobId}::uuid GROUP BY row HAVING count(*) > 1`;
    expect(dupes).toEqual([]);
    expect(await db().transaction.count({ where: { jobId } })).toBe(60);
    // The resumed run asked the model only for the rows not yet committed. The first run may have
    // had one answer arrive as it was stopped (in flight 1), which it did not commit: that row is
    // asked again, and is one of the rows after the cursor.
    const okCalls = (startedAt: { gte: Date } | { lt: Date }) =>
      db().modelCall.count({ where: { jobId, outcome: "ok", startedAt } });
    expect(await okCalls({ gte: retriedAt })).toBe(60 - before.cursor);
    const firstRun = await okCalls({ lt: retriedAt });
    expect(firstRun).toBeGreaterThanOrEqual(before.cursor);
    expect(firstRun).toBeLessThanOrEqual(before.cursor + 1);
  });

  it("a retried job is not taken for lost while its queue job is being replaced: the retry counts as a sign of life", async () => {
    const jobId = await h.importOf(2, "retry");
    await db().job.update({
      where: { id: jobId },
      data: { status: "timed_out", attempt: 1, heartbeatAt: new Date(Date.now() - 3_600_000) },
    });
    expect(await retry.retryJob(jobId, operator)).toMatchObject({ type: "retried" });
    // The moment between the row's claim and the new queue job: the queue knows no job yet.
    await h.m.queues.queue("imports").remove(jobId);
    const reaper = await import("@/lib/runs/reaper");
    await reaper.reapStuckJobs();
    expect((await db().job.findUniqueOrThrow({ where: { id: jobId } })).status).toBe("queued");
  });

  it("refuses jobs that are queued, running, delayed or completed, with the reason", async () => {
    const jobId = await h.importOf(2, "retry");
    for (const status of ["queued", "running", "delayed", "completed"] as const) {
      await db().job.update({ where: { id: jobId }, data: { status } });
      const r = await retry.retryJob(jobId, operator);
      expect(r).toMatchObject({ type: "not_retryable", status });
    }
    expect(await retry.retryJob("not-a-uuid", operator)).toEqual({ type: "not_found" });
  });

  it("takes a larger budget within bounds, recorded as the operator's, and refuses one out of bounds", async () => {
    const jobId = await h.importOf(2, "retry");
    await db().job.update({ where: { id: jobId }, data: { status: "killed" } });
    expect(await retry.retryJob(jobId, operator, { budgetSoftS: 600_000 * 5 })).toMatchObject({
      type: "budget_out_of_bounds",
    });
    const r = await retry.retryJob(jobId, operator, { budgetSoftS: 1_200_000 });
    expect(r).toMatchObject({ type: "retried", budgetSoftMs: 1_200_000_000, budgetHardMs: 1_800_000_000 });
    const row = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(row.budgetSource).toBe("operator:oncall");
    await h.m.queues.queue("imports").remove(jobId);
  });
});
