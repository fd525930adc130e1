import { randomBytes, randomUUID } from "node:crypto";
import { Registry } from "prom-client";
import { afterAll, describe, expect, it } from "vitest";
import { catalogPairs, QUEUE_NAMES } from "@/lib/catalog/catalog";
import { closeDb, db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { createMetrics } from "@/lib/metrics/metrics";
import { readWorkerSnapshots, renderMetrics, startMetricsPublisher } from "@/lib/reports/metrics-publish";
import { DATABASE_SOURCES } from "@/lib/reports/metric-sources";
import { pausedHashKey, pauseQueue } from "@/lib/queues/pause";
import { closeQueues, enqueueJob, queue } from "@/lib/queues/queues";
import { closeRedis, redis } from "@/lib/redis/client";
import { getCallAllowance } from "@/lib/modelcalls/allowance";
import { sweepPolicy } from "@/lib/quota/settings";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { waitFor } from "@/test/helpers/wait";

/**
 * The two gauges the alert rules and the board compare against: the call allowance (the
 * reference line of /model-calls) and the reserve sweep window. Both are read at scrape time, by
 * the process that serves `GET /api/metrics`.
 */

const tenantSlug = `ops-${randomUUID().slice(0, 8)}`;
const created: string[] = [];

afterAll(async () => {
  await db().job.deleteMany({ where: { id: { in: created } } });
  await queue("generations").resume();
  await redis().del(pausedHashKey());
  await queue("generations").obliterate({ force: true });
  await closeQueues();
  await closeRedis();
  await closeDb();
});

async function values(registry: Registry, name: string) {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return metric?.values ?? [];
}

describe("bounded_call_allowance_seconds", () => {
  it("is, for every queue and kind of the catalog, the call allowance /model-calls draws, in seconds", async () => {
    const tenantId = await ensureTenant(tenantSlug);
    // Typical csv_import jobs on imports, so at least that pair has an allowance to report.
    for (const total of [40, 50, 60]) {
      const job = await db().job.create({
        data: {
          kind: "csv_import",
          queue: "imports",
          tenantId,
          total,
          budgetSoftMs: 600_000,
          budgetHardMs: 900_000,
          budgetSource: "test",
          progressToken: randomBytes(16).toString("hex"),
        },
        select: { id: true },
      });
      created.push(job.id);
    }
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => ({}),
      callAllowances: DATABASE_SOURCES.callAllowances,
    });
    const reported = await values(m.registry, "bounded_call_allowance_seconds");

    const expected = [];
    for (const { queue, kind } of catalogPairs()) {
      const allowance = await getCallAllowance(kind, queue);
      if (allowance) expected.push({ labels: { queue, kind }, value: allowance.allowanceMs / 1000 });
    }
    expect(expected.some((e) => e.labels.queue === "imports" && e.labels.kind === "csv_import")).toBe(true);
    expect(reported.map((v) => ({ labels: v.labels, value: v.value }))).toEqual(expect.arrayContaining(expected));
    expect(reported).toHaveLength(expected.length);
  });

  it("takes an injected source, and a failing one leaves the gauge empty and the scrape up", async () => {
    let fail = false;
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => ({}),
      callAllowances: async () => {
        if (fail) throw new Error("database is down");
        return [{ queue: "agent-interactive", kind: "agent_run", seconds: 6 }];
      },
    });
    expect(await values(m.registry, "bounded_call_allowance_seconds")).toEqual([
      { labels: { queue: "agent-interactive", kind: "agent_run" }, value: 6 },
    ]);
    fail = true;
    expect(await values(m.registry, "bounded_call_allowance_seconds")).toEqual([]);
  });

  it("is not reported by a process that publishes to Redis (a worker): the web computes it once", async () => {
    let calls = 0;
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => ({}),
      callAllowances: async () => {
        calls += 1;
        return [{ queue: "imports", kind: "csv_import", seconds: 12 }];
      },
    });
    m.disableScrapeTimeGauges();
    expect(await values(m.registry, "bounded_call_allowance_seconds")).toEqual([]);
    expect(calls).toBe(0);
  });
});

describe("the domain's label values", () => {
  it("a scrape starts the counters only a domain knows the labels of at 0, though the registry was created without them", async () => {
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => ({}),
      callAllowances: async () => [],
    });
    const { text } = await renderMetrics({ metrics: m, connection: redis(), sources: "web" });
    expect(text).toContain('bounded_provider_waits_total{provider="ocr",process="web"} 0');
    expect(text).toContain(
      'bounded_outside_service_state_changes_total{service="images",state="half_open",process="web"} 0',
    );
    expect(text).toContain('bounded_reserve_late_releases_total{kind="dislike",resolution="debt",process="web"} 0');
    expect(text).toContain(
      'bounded_rate_limit_reschedules_total{queue="marketplace-sync",family="statistics",process="web"} 0',
    );
    expect(text).toContain(
      'bounded_rate_limit_reschedules_total{queue="imports",family="provider:model",process="web"} 0',
    );
  });
});

describe("bounded_reserve_sweep_window_seconds", () => {
  it("is the sweeper's window this process uses, in production seconds", async () => {
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => ({}),
      callAllowances: async () => [],
      sweepWindowSeconds: DATABASE_SOURCES.sweepWindowSeconds,
    });
    expect(await values(m.registry, "bounded_reserve_sweep_window_seconds")).toEqual([
      { labels: {}, value: sweepPolicy().windowMs / 1000 },
    ]);
  });
});

describe("bounded_queue_jobs, bounded_queue_oldest_waiting_seconds, bounded_queue_soft_budget_seconds, bounded_queue_paused", () => {
  const Q = "generations";
  const noDb = { countStuck: async () => ({}), callAllowances: async () => [] };

  it("are read at scrape time for every queue of the catalog: BullMQ's counts, the oldest queued row's wait, the budget, the pause", async () => {
    await queue(Q).obliterate({ force: true });
    // Open rows other test files left on this queue (the reaper queues such rows again rather than
    // ending them) would be the oldest: this test's row must be the only one waiting.
    await db().job.updateMany({
      where: { queue: Q, status: { in: ["queued", "delayed"] } },
      data: { status: "cancelled", finishedAt: new Date() },
    });
    const tenantId = await ensureTenant(tenantSlug);
    const job = await db().job.create({
      data: {
        kind: "card_generation",
        queue: Q,
        tenantId,
        total: 1,
        budgetSoftMs: 600_000,
        budgetHardMs: 900_000,
        budgetSource: "test",
        progressToken: randomBytes(16).toString("hex"),
        // Oldest by far on this queue: queued an hour of production time ago.
        createdAt: new Date(Date.now() - 3_600_000 * env().BOUNDED_TIME_SCALE),
      },
      select: { id: true },
    });
    created.push(job.id);
    await enqueueJob(Q, "card_generation", { jobId: job.id }, { priority: 2 });
    await pauseQueue(Q, { username: "metrics-test" });

    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      ...noDb,
      queueGauges: DATABASE_SOURCES.queueGauges,
    });
    const jobs = await values(m.registry, "bounded_queue_jobs");
    expect(jobs).toHaveLength(QUEUE_NAMES.length * 4);
    for (const queueName of QUEUE_NAMES)
      for (const state of ["waiting", "active", "delayed", "failed"])
        expect(
          jobs.filter((v) => v.labels.queue === queueName && v.labels.state === state),
          `${queueName} ${state}`,
        ).toHaveLength(1);
    expect(jobs.find((v) => v.labels.queue === Q && v.labels.state === "waiting")?.value).toBe(1);

    const oldest = await values(m.registry, "bounded_queue_oldest_waiting_seconds");
    expect(oldest.map((v) => v.labels.queue).sort()).toEqual([...QUEUE_NAMES].sort());
    expect(oldest.find((v) => v.labels.queue === Q)!.value).toBeGreaterThanOrEqual(3_600);
    expect(oldest.find((v) => v.labels.queue === Q)!.value).toBeLessThan(3_600 * 1.5);

    const budgets = await values(m.registry, "bounded_queue_soft_budget_seconds");
    expect(budgets.find((v) => v.labels.queue === "agent-interactive")?.value).toBe(60);
    expect(budgets).toHaveLength(QUEUE_NAMES.length);

    const paused = await values(m.registry, "bounded_queue_paused");
    expect(paused.find((v) => v.labels.queue === Q)?.value).toBe(1);
    expect(paused.filter((v) => v.value === 1).map((v) => v.labels.queue)).toEqual([Q]);
  });

  it("a failing read leaves them empty and the scrape up", async () => {
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      ...noDb,
      queueGauges: async () => {
        throw new Error("redis is down");
      },
    });
    expect(await values(m.registry, "bounded_queue_jobs")).toEqual([]);
    expect(await values(m.registry, "bounded_reserve_sweep_window_seconds")).toHaveLength(1);
  });

  it("one scrape of the web with a worker publishing shows each series once, not once per process", async () => {
    let reads = 0;
    const source = async () => {
      reads += 1;
      return DATABASE_SOURCES.queueGauges();
    };
    const web = createMetrics(new Registry(), { defaultMetrics: false, ...noDb, queueGauges: source });
    const worker = createMetrics(new Registry(), { defaultMetrics: false, ...noDb, queueGauges: source });
    const stop = startMetricsPublisher("workers", { metrics: worker, intervalMs: 60_000, connection: redis() });
    try {
      // The worker's snapshot is in Redis before the scrape.
      await waitFor(async () => (await readWorkerSnapshots(redis())).length > 0, {
        what: "the worker's metrics snapshot in Redis",
        timeoutMs: 5_000,
      });
      const { text } = await renderMetrics({ metrics: web, connection: redis() });
      const lines = text
        .split("\n")
        .filter((l) => l.startsWith(`bounded_queue_jobs{queue="${Q}",state="waiting",process="web"}`));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/ 1$/);
      for (const name of [
        "bounded_queue_oldest_waiting_seconds",
        "bounded_queue_paused",
        "bounded_queue_soft_budget_seconds",
      ]) {
        expect(
          text.split("\n").filter((l) => l.startsWith(`${name}{queue="${Q}",`)),
          name,
        ).toHaveLength(1);
      }
      // Four gauges, one read: the worker never reads, the web once per scrape.
      expect(reads).toBe(1);
    } finally {
      await stop();
    }
  });
});
