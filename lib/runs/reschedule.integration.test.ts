import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { startSyncHarness } from "@/test/helpers/sync-harness";

// The reschedule policy around the deadline policy, with real BullMQ workers. Time scale 0.01:
// statistics allow one request per 600 ms; 100 s of production budget is 1 s here.
const PAGES = 4;
let h: Awaited<ReturnType<typeof startSyncHarness>>;

beforeAll(async () => {
  h = await startSyncHarness({ timeScale: 0.01, pages: PAGES });
});

afterEach(async () => {
  await h.stopWorkers();
  h.sim.marketplace.reset();
});

afterAll(async () => {
  await h.close();
});

/** A statistics sync whose row is set up by `prepare` before any worker sees it. */
async function sync(label: string, prepare: Parameters<ReturnType<typeof h.m.db.db>["job"]["update"]>[0]["data"] = {}) {
  const tenant = h.tenant(label);
  const started = await h.m.syncs.startSync({ tenant, family: "statistics" });
  await h.m.db.db().job.update({ where: { id: started.jobId }, data: prepare });
  return { ...started, tenant };
}

const terminal = (id: string) =>
  h.waitFor(`job ${id} to end`, async () => {
    const r = await h.row(id);
    // The status flips first, the message follows in a second statement.
    return !["queued", "running", "delayed"].includes(r.status) && r.message !== null && r;
  });

describe("deadline budget under rescheduling", () => {
  it("a resumed run carries over the slot time already used: it times out at the remainder, not a fresh budget", async () => {
    // 300 s soft (3 s here), 295 s of it already used by earlier runs: 50 ms left.
    const s = await sync("carry", {
      budgetSoftMs: 300_000,
      budgetHardMs: 900_000,
      budgetSource: "operator:test",
      slotMsUsed: 295_000,
    });
    // Every page would come at once: make the run last by itself.
    const { runJob } = await import("@/lib/runs/run-job");
    const { logger } = await import("@/lib/log");
    const queueJob = {
      id: "x",
      name: "marketplace_sync",
      queueName: "marketplace-sync",
      data: { jobId: s.jobId },
    } as never;
    await h.m.queues.queue("marketplace-sync").remove(h.m.syncs.syncQueueJobId(s.tenant, "statistics"));
    const err = await runJob(
      {
        marketplace_sync: ({ signal }) =>
          new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))),
      },
      queueJob,
      new AbortController().signal,
      logger("test"),
    ).catch((e: Error) => e);
    expect((err as Error).message).toBe("soft limit reached");
    const r = await h.row(s.jobId);
    expect(r.status).toBe("timed_out");
    // Without the carry-over it would have had three seconds.
    expect(r.finishedAt!.getTime() - r.attemptStartedAt!.getTime()).toBeLessThan(1_500);
    expect(r.message).toMatch(
      /^Timed out after 0 pages \(budget 300 s\)\. Retry it: it resumes at the page it reached\.$/,
    );
  });

  it("the maximum total age ends a sync timed_out, with what it was waiting for", async () => {
    // Created just under 6 h ago (216 s here): the first wait for a window takes it past.
    const s = await sync("maxage", { createdAt: new Date(Date.now() - 216_000 + 300) });
    h.startWorker();
    const r = await terminal(s.jobId);
    expect(r.status).toBe("timed_out");
    expect(r.processed).toBeGreaterThanOrEqual(1);
    expect(r.processed).toBeLessThan(PAGES);
    expect(r.message).toMatch(
      new RegExp(
        `^Timed out after ${r.processed} pages?: waiting \\d+ s more for statistics:${s.tenant} would take it past its maximum age of 6 h \\(waits for rate-limit windows count there, not in its budget\\)\\. Retry it: it resumes at the page it reached\\.$`,
      ),
    );
    const qj = await h.m.queues.queue("marketplace-sync").getJob(h.m.syncs.syncQueueJobId(s.tenant, "statistics"));
    // The row is final before the worker hands the queue job back as failed: wait for the queue's side.
    await vi.waitFor(async () => expect(await qj?.getState()).toBe("failed"), { timeout: 5_000 });
  }, 30_000);
});

describe("a resume", () => {
  it("goes on with its attempt: a sync that waited for windows several times ends on attempt 1, with one start on its timeline and one deferral per wait", async () => {
    const s = await sync("resume");
    h.startWorker();
    const r = await terminal(s.jobId);
    expect(r).toMatchObject({ status: "completed", processed: PAGES, attempt: 1 });
    expect(r.reschedules).toBeGreaterThanOrEqual(2);
    const events = await h.m.db.db().jobEvent.groupBy({
      by: ["type", "attempt"],
      where: { jobId: s.jobId, type: { in: ["started", "delayed"] } },
      _count: { _all: true },
    });
    expect(
      events
        .map((e) => ({ type: e.type, attempt: e.attempt, n: e._count._all }))
        .sort((a, b) => (a.type < b.type ? -1 : 1)),
    ).toEqual([
      { type: "delayed", attempt: 1, n: r.reschedules },
      { type: "started", attempt: 1, n: 1 },
    ]);
  }, 30_000);
});

describe("the deferral context", () => {
  it("is opened only around the rescheduling queues' jobs: running at the same time in one process, the sync defers while a sweep on a deadline-only queue sleeps through the same wait", async () => {
    const { makeJob } = await import("@/test/helpers/jobs");
    const { acquire } = await import("@/lib/ratelimit/limiter");
    const { logger } = await import("@/lib/log");
    const sync = await makeJob(h.tenant("ctx-sync"), {
      kind: "marketplace_sync",
      queue: "marketplace-sync",
      softMs: 600_000,
      hardMs: 900_000,
    });
    const other = await makeJob(h.tenant("ctx-sweep"), {
      kind: "overdue_invoices",
      queue: "sweeps",
      softMs: 600_000,
      hardMs: 900_000,
    });
    const moved: number[] = [];
    const fakeQueueJob = (jobId: string, queueName: string, name: string) =>
      ({
        id: jobId,
        name,
        queueName,
        data: { jobId },
        moveToDelayed: async (at: number) => void moved.push(at),
      }) as never;
    // Both take two statistics tokens for a tenant of their own, at the same moment: the second waits a window (600 ms here).
    let release!: () => void;
    const together = new Promise<void>((r) => (release = r));
    const waited: Record<string, number> = {};
    const twoTokens = (label: string, scope: string) => async () => {
      await together;
      await acquire(scope);
      const t0 = performance.now();
      await acquire(scope);
      waited[label] = performance.now() - t0;
    };
    const processors = {
      marketplace_sync: twoTokens("sync", `statistics:${h.tenant("ctx-a")}`),
      overdue_invoices: twoTokens("sweep", `statistics:${h.tenant("ctx-b")}`),
    };
    const deps = { processors, shutdown: new AbortController().signal, log: logger("test") };
    const runs = Promise.allSettled([
      h.m.processor.queueProcessor("marketplace-sync", deps)(
        fakeQueueJob(sync.id, "marketplace-sync", "marketplace_sync"),
        "token",
      ),
      h.m.processor.queueProcessor("sweeps", deps)(fakeQueueJob(other.id, "sweeps", "overdue_invoices"), "token"),
    ]);
    release();
    const [syncRun, sweepRun] = await runs;
    expect(syncRun.status).toBe("rejected");
    expect((syncRun as PromiseRejectedResult).reason.name).toBe("DelayedError");
    expect(moved).toHaveLength(1);
    expect((await h.row(sync.id)).status).toBe("delayed");
    expect(sweepRun.status).toBe("fulfilled");
    expect(waited.sweep).toBeGreaterThan(400);
    expect((await h.row(other.id)).status).toBe("completed");
  });
});

describe("the reaper and delayed jobs", () => {
  it("a delayed row is never reaped, however old its heartbeat; one long past its wake-up time is flagged", async () => {
    const s = await sync("reap");
    const worker = h.startWorker();
    await h.waitFor("the sync to be delayed", async () => (await h.row(s.jobId)).status === "delayed");
    // No worker to wake it: it stays delayed in the queue.
    await worker.close();
    const row = await h.row(s.jobId);
    expect(row.status).toBe("delayed");

    const muchLater = new Date(Date.now() + 24 * 3600_000);
    const reaped = await h.m.reaper.reapStuckJobs(muchLater);
    expect(reaped.map((r) => r.id)).not.toContain(s.jobId);
    expect((await h.row(s.jobId)).status).toBe("delayed");

    expect((await h.m.stuck.listOverdueDelayedJobs(100, new Date())).map((d) => d.id)).not.toContain(s.jobId);
    const overdue = (await h.m.stuck.listOverdueDelayedJobs(100, muchLater)).find((d) => d.id === s.jobId);
    expect(overdue).toMatchObject({
      tenant: s.tenant,
      kind: "marketplace_sync",
      queueState: "delayed",
      wakeUpAt: row.wakeUpAt!.toISOString(),
    });
    expect(overdue!.overdueMs).toBeGreaterThan((23 * 3600_000) / 0.01);
  }, 30_000);
});

// Last: by now the worker's first-run costs (connections, module loading) are paid, and the slot
// time measured is the steady one.
describe("slot time only", () => {
  it("time spent waiting in delayed does not consume the budget: a sync whose wall time is longer than its soft budget completes", async () => {
    // 150 s soft (1.5 s here); four pages take three windows (≥ 1.8 s) of waiting.
    const s = await sync("wall", { budgetSoftMs: 150_000, budgetHardMs: 300_000, budgetSource: "operator:test" });
    h.startWorker();
    const r = await terminal(s.jobId);
    expect(r.status).toBe("completed");
    expect(r.finishedAt!.getTime() - r.startedAt!.getTime()).toBeGreaterThan(1_500);
    expect(r.reschedules).toBeGreaterThanOrEqual(2);
    // The slot time the runs used is kept on the row, in production units, below the budget.
    expect(r.slotMsUsed).toBeGreaterThan(0);
    expect(r.slotMsUsed).toBeLessThan(150_000);
  }, 30_000);

  it("each delayed event says the slot time used and the budget in whole seconds, thousands separated, and counts the reschedules", async () => {
    const s = await sync("words", { budgetSoftMs: 1_800_000, budgetHardMs: 2_400_000, budgetSource: "operator:test" });
    h.startWorker();
    const r = await terminal(s.jobId);
    expect(r.status).toBe("completed");
    const events = await h.m.db.db().jobEvent.findMany({
      where: { jobId: s.jobId, type: "delayed" },
      orderBy: { id: "asc" },
      select: { message: true },
    });
    expect(events.length).toBe(r.reschedules);
    for (const [i, e] of events.entries())
      expect(e.message).toMatch(
        new RegExp(
          `Gave its worker slot back after \\d+ s; \\d+ s of its 1,800 s budget used so far \\(reschedule ${i + 1}\\)\\.$`,
        ),
      );
  }, 30_000);
});
