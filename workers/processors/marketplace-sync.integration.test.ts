import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startSyncHarness } from "@/test/helpers/sync-harness";

// Real BullMQ workers, PostgreSQL, Redis and the marketplace simulator. At time scale 0.01 the
// statistics family allows one request per 600 ms and the deferral threshold is 50 ms: every
// page after the first waits a window, which a sync spends in *delayed*, not in its slot.
const PAGES = 8;
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

const queue = () => h.m.queues.queue("marketplace-sync");

describe("marketplace_sync under the reschedule policy", () => {
  it("a throttled sync gives its slot back between pages: attemptsMade stays 0 across several reschedules, every page is fetched and written once, no 429", async () => {
    const tenant = h.tenant("resched");
    h.startWorker();
    const started = await h.m.syncs.startSync({ tenant, family: "statistics" });
    expect(started.existing).toBe(false);
    const queueJobId = h.m.syncs.syncQueueJobId(tenant, "statistics");

    // Several reschedules, observed while the job waits in delayed.
    const seen = await h.waitFor("three reschedules", async () => {
      const r = await h.row(started.jobId);
      if (r.status !== "delayed" || r.reschedules < 3) return null;
      const qj = await queue().getJob(queueJobId);
      return qj && (await qj.getState()) === "delayed" ? { r, qj } : null;
    });
    expect(seen.qj.attemptsMade).toBe(0);
    expect(seen.qj.attemptsStarted).toBeGreaterThanOrEqual(3);
    expect(seen.r.message).toMatch(
      /^Waiting \d+ s for statistics:t-resched-[0-9a-f]{8} \(the marketplace's rate limit\)/,
    );
    expect(seen.r.wakeUpAt!.getTime()).toBeGreaterThan(seen.r.heartbeatAt!.getTime());
    // The end user is told what happens, in production seconds (a window is 60 s).
    const { getProgress } = await import("@/lib/job-views/queries");
    const progress = await getProgress(started.progressToken, seen.r.heartbeatAt!);
    expect(progress).toMatchObject({
      status: "delayed",
      title: "Syncing statistics from the marketplace",
      noun: "page",
    });
    expect(progress!.message).toMatch(/^Waiting \d+ s for the marketplace's rate limit; it goes on by itself\.$/);
    expect(progress!.waitSeconds).toBeGreaterThan(20);
    expect(progress!.waitSeconds).toBeLessThanOrEqual(125);

    const done = await h.waitFor("the sync to complete", async () => {
      const r = await h.row(started.jobId);
      return r.status === "completed" && r.message !== null && r;
    });
    expect(done.processed).toBe(PAGES);
    expect(done.total).toBe(PAGES);
    expect(done.failed).toBe(0);
    expect(done.reschedules).toBeGreaterThanOrEqual(3);
    expect(done.message).toBe(`Synced all ${PAGES} pages of statistics for ${tenant}.`);
    // The row is finalized before the processor returns to BullMQ: wait for the queue's own record.
    // Its record read again once it is completed: a record read before the state was the finish's
    // race (attemptsMade 0, the state completed by the time it was asked).
    const finished = await h.waitFor("the queue job to be completed", async () => {
      const qj = await queue().getJob(queueJobId);
      return qj && (await qj.getState()) === "completed" ? queue().getJob(queueJobId) : null;
    });
    // One finished run, however many times the job was rescheduled.
    expect(finished?.attemptsMade).toBe(1);
    // Each page asked for once: a resumed run starts at the page after the cursor.
    expect(h.sim.marketplace.stats()).toMatchObject({ accepted: PAGES, violations: { total: 0 } });
    const records = await h.m.db
      .db()
      .marketplaceRecord.groupBy({ by: ["page"], where: { jobId: started.jobId }, _count: { _all: true } });
    expect(records.map((g) => [g.page, g._count._all]).sort((a, b) => a[0]! - b[0]!)).toEqual(
      Array.from({ length: PAGES }, (_, i) => [i + 1, 20]),
    );
    // The timeline says what happened; the per-minute rollup counts it for the limiter page.
    const delayedEvents = await h.m.db.db().jobEvent.count({ where: { jobId: started.jobId, type: "delayed" } });
    expect(delayedEvents).toBe(done.reschedules);
    const rollup = await h.m.db.db().rateLimitRollup.aggregate({
      where: { tenant, family: "statistics", queue: "marketplace-sync" },
      _sum: { reschedules: true },
    });
    expect(rollup._sum.reschedules).toBe(done.reschedules);
    // Prometheus: counted by queue and family (never by tenant), the waits in production seconds.
    const { processMetrics } = await import("@/lib/metrics/metrics");
    const registry = processMetrics().registry;
    const counter = await registry.getSingleMetric("bounded_rate_limit_reschedules_total")!.get();
    expect(
      counter.values.find((v) => v.labels.family === "statistics" && v.labels.queue === "marketplace-sync")?.value,
    ).toBeGreaterThanOrEqual(done.reschedules);
    expect(counter.values.every((v) => !("tenant" in v.labels))).toBe(true);
    const waits = await registry.getSingleMetric("bounded_rate_limit_wait_seconds")!.get();
    const named = (name: string) =>
      waits.values.find((v) => (v as { metricName?: string }).metricName === name && v.labels.family === "statistics");
    const count = named("bounded_rate_limit_wait_seconds_count");
    const sum = named("bounded_rate_limit_wait_seconds_sum");
    expect(count?.value).toBeGreaterThanOrEqual(done.reschedules);
    expect(sum!.value / count!.value).toBeGreaterThan(20);
    // The limiter page reads the same: the series, the tenant's time lost, its bucket's state.
    const { getLimiterReport } = await import("@/lib/reports/ratelimit");
    const report = await getLimiterReport({ range: "1h" });
    expect(report.series.find((x) => x.key === "marketplace-sync · statistics")?.reschedules).toBeGreaterThanOrEqual(
      done.reschedules,
    );
    const mine = report.topTenants.find((t) => t.tenant === tenant);
    expect(mine).toMatchObject({ reschedules: done.reschedules, families: ["statistics"] });
    expect(mine!.waitSeconds).toBeGreaterThan(done.reschedules * 20);
    expect(report.points.reduce((n, p) => n + (p.counts["marketplace-sync · statistics"] ?? 0), 0)).toBe(
      report.series.find((x) => x.key === "marketplace-sync · statistics")!.reschedules,
    );
    expect(report.bucketStates?.find((b) => b.scope === `statistics:${tenant}`)).toMatchObject({
      capacity: 1,
      family: "statistics",
    });
  }, 60_000);

  it("one sync per tenant and family: while it is delayed, a second start answers the same job and a duplicate queue add is dropped", async () => {
    const tenant = h.tenant("dupe");
    h.startWorker();
    const first = await h.m.syncs.startSync({ tenant, family: "statistics" });
    const queueJobId = h.m.syncs.syncQueueJobId(tenant, "statistics");
    await h.waitFor("the sync to be delayed", async () => (await h.row(first.jobId)).status === "delayed");

    const again = await h.m.syncs.startSync({ tenant, family: "statistics" });
    expect(again).toMatchObject({ jobId: first.jobId, progressToken: first.progressToken, existing: true });
    // A fan-out that adds the queue job itself is dropped by the queue: the delayed job keeps its data.
    await queue().add("marketplace_sync", { jobId: randomUUID() }, { jobId: queueJobId });
    const held = await queue().getJob(queueJobId);
    expect(held?.data).toMatchObject({ jobId: first.jobId });
    expect(await h.m.db.db().job.count({ where: { kind: "marketplace_sync", tenant: { slug: tenant } } })).toBe(1);

    // Another family of the same tenant is another sync.
    const orders = await h.m.syncs.startSync({ tenant, family: "orders" });
    expect(orders.jobId).not.toBe(first.jobId);
    await h.waitFor("both syncs to complete", async () => {
      const rows = await h.m.db
        .db()
        .job.findMany({ where: { id: { in: [first.jobId, orders.jobId] } }, select: { status: true } });
      return rows.every((r) => r.status === "completed");
    });
    // Once finished, the pair can be synced again: a new job, under the same queue job id.
    const next = await h.m.syncs.startSync({ tenant, family: "statistics" });
    expect(next.existing).toBe(false);
    expect(next.jobId).not.toBe(first.jobId);
    expect((await queue().getJob(queueJobId))?.data).toMatchObject({ jobId: next.jobId });
    await h.waitFor("the second sync to complete", async () => (await h.row(next.jobId)).status === "completed");
  }, 60_000);

  it("two syncs started at the same moment for one tenant and family make one job", async () => {
    const tenant = h.tenant("race");
    const [a, b] = await Promise.all([
      h.m.syncs.startSync({ tenant, family: "ads" }),
      h.m.syncs.startSync({ tenant, family: "ads" }),
    ]);
    expect(a.jobId).toBe(b.jobId);
    expect([a.existing, b.existing].sort()).toEqual([false, true]);
    await queue().remove(h.m.syncs.syncQueueJobId(tenant, "ads"));
  });

  it("50 tenants syncing at once, every family, through the worker: all pages written, 0 simulator 429s", async () => {
    const { FAMILIES } = await import("@/lib/ratelimit/buckets");
    h.startWorker(10);
    const syncs = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        h.m.syncs.startSync({ tenant: h.tenant(`fifty${i}`), family: FAMILIES[i % FAMILIES.length]! }),
      ),
    );
    const ids = syncs.map((s) => s.jobId);
    await h.waitFor(
      "all 50 syncs to complete",
      async () => (await h.m.db.db().job.count({ where: { id: { in: ids }, status: "completed" } })) === 50,
      120_000,
    );
    expect(await h.m.db.db().marketplaceRecord.count({ where: { jobId: { in: ids } } })).toBe(50 * PAGES * 20);
    expect(h.sim.marketplace.violations().total).toBe(0);
    // Every page fetched once — unless a run lost its lock on this loaded machine and another worker
    // took the job over (a `crash_resumed` event): its uncommitted page is fetched again, never written twice.
    const takeovers = await h.m.db
      .db()
      .jobEvent.count({ where: { jobId: { in: ids }, type: { in: ["crash_resumed", "requeued"] } } });
    expect(h.sim.marketplace.stats().accepted).toBeGreaterThanOrEqual(50 * PAGES);
    expect(h.sim.marketplace.stats().accepted - 50 * PAGES).toBeLessThanOrEqual(takeovers);
  }, 150_000);

  it("bad input is refused before anything is created", async () => {
    await expect(h.m.syncs.startSync({ tenant: "acme", family: "invoices" })).rejects.toThrow(
      /family must be one of statistics, orders, ads/,
    );
    await expect(h.m.syncs.startSync({ tenant: "Not A Slug", family: "ads" })).rejects.toThrow(/tenant must be/);
    await expect(h.m.syncs.startSync({ tenant: "acme", family: "ads", extra: 1 })).rejects.toThrow();
  });
});
