import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { TERMINAL_STATUSES } from "@/lib/core/job-statuses";
import { flushModelCallRecords, recordModelCall } from "@/lib/modelcalls/record";
import { JOB_KINDS } from "@/lib/catalog/catalog";
import { closeRedis, redis } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import { createMetrics, processMetrics } from "./metrics";
import { renderMetrics, snapshotKey, startMetricsPublisher, type MetricsSnapshot } from "@/lib/reports/metrics-publish";

const keys: string[] = [];
const queues: string[] = [];

afterEach(async () => {
  if (keys.length) await redis().del(...keys.splice(0));
  for (const queue of queues.splice(0)) {
    await db().modelCall.deleteMany({ where: { queue } });
    await db().modelCallRollup.deleteMany({ where: { queue } });
    await db().modelCallRollupDay.deleteMany({ where: { queue } });
    await db().modelCallRollupWeek.deleteMany({ where: { queue } });
  }
});

afterAll(async () => {
  await closeRedis();
  await closeDb();
});

/** The value of one sample in Prometheus text, matched by name and (a subset of) labels. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const found = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(m[3]);
  }
  return undefined;
}

const unique = (label: string) => `${label}-${randomUUID().slice(0, 8)}`;

/** A worker's snapshot as `startMetricsPublisher` writes it, under a fake host and pid. */
async function putWorkerSnapshot(registry: Registry, pid: number): Promise<void> {
  const snapshot: MetricsSnapshot = {
    role: "workers",
    host: "fake-worker-host",
    pid,
    at: new Date().toISOString(),
    metrics: await registry.getMetricsAsJSON(),
  };
  const k = snapshotKey("fake-worker-host", pid);
  keys.push(k);
  await redis().set(k, JSON.stringify(snapshot), "PX", 60_000);
}

describe("GET /api/metrics merges the web's registry with every live worker snapshot", () => {
  it("a worker's snapshot in Redis and the web's own series appear side by side, each with its process label", async () => {
    const kind = unique("kind");
    const queue = unique("queue");
    const worker = createMetrics(new Registry());
    worker.disableScrapeTimeGauges();
    worker.jobsFinished.inc({ kind, status: "completed" }, 3);
    worker.jobItemsFailed.inc({ kind }, 20);
    worker.observeModelCall({ queue, jobKind: kind, outcome: "ok", durationMs: 5_500 * env().BOUNDED_TIME_SCALE });
    await putWorkerSnapshot(worker.registry, 4242);
    const workerProcess = { process: "workers-fake-worker-host-4242" };

    const web = createMetrics(new Registry(), { countStuck: async () => ({ [kind]: 2 }) });
    web.jobsFinished.inc({ kind, status: "completed" });
    web.jobsFinished.inc({ kind, status: "completed" });
    web.jobsFinished.inc({ kind, status: "timed_out" });
    web.jobsReaped.inc({ kind });
    web.observeModelCall({ queue, jobKind: kind, outcome: "ok", durationMs: scaled(40_000) });
    const webProcess = { process: "web" };

    const { text, contentType } = await renderMetrics({ metrics: web });
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(sample(text, "bounded_jobs_finished_total", { kind, status: "completed", ...workerProcess })).toBe(3);
    expect(sample(text, "bounded_jobs_finished_total", { kind, status: "completed", ...webProcess })).toBe(2);
    expect(sample(text, "bounded_jobs_finished_total", { kind, status: "timed_out", ...webProcess })).toBe(1);
    expect(sample(text, "bounded_job_items_failed_total", { kind, ...workerProcess })).toBe(20);
    expect(sample(text, "bounded_jobs_reaped_total", { kind, ...webProcess })).toBe(1);
    // Every series names its process: nothing unlabelled is left to be summed blindly.
    const series = text.split("\n").filter((l) => l && !l.startsWith("#"));
    expect(series.filter((l) => !/[{,]process="/.test(l))).toEqual([]);
    const call = { queue, kind, outcome: "ok", type: "model" };
    expect(sample(text, "bounded_model_call_duration_seconds_count", { ...call, ...workerProcess })).toBe(1);
    expect(sample(text, "bounded_model_call_duration_seconds_sum", { ...call, ...workerProcess })).toBeCloseTo(5.5, 6);
    expect(sample(text, "bounded_model_call_duration_seconds_bucket", { ...call, ...workerProcess, le: "7.5" })).toBe(
      1,
    );
    expect(sample(text, "bounded_model_call_duration_seconds_bucket", { ...call, ...webProcess, le: "30" })).toBe(0);
    expect(sample(text, "bounded_model_call_duration_seconds_bucket", { ...call, ...webProcess, le: "45" })).toBe(1);
    expect(sample(text, "bounded_jobs_stuck", { kind, ...webProcess })).toBe(2);
    expect(sample(text, "bounded_jobs_stuck", { kind, ...workerProcess })).toBeUndefined();
    // Node's default metrics, prefixed, once per metric name, one series per process.
    expect(sample(text, "bounded_process_cpu_user_seconds_total", webProcess)).toBeGreaterThan(0);
    // The worker's registry was made a moment ago: prom-client counts CPU from then on, which on a
    // busy machine can still be 0 clock ticks. The series is there, whatever it reads.
    expect(sample(text, "bounded_process_cpu_user_seconds_total", workerProcess)).toBeGreaterThanOrEqual(0);
    expect(text.match(/^# TYPE bounded_process_cpu_user_seconds_total /gm)).toHaveLength(1);
    expect(sample(text, "bounded_process_start_time_seconds", workerProcess)).toBeGreaterThan(0);
    // The gauges prom-client names like counters are left out; their per-type twins stay.
    expect(text).not.toMatch(/^bounded_nodejs_active_(handles|requests|resources)_total/m);
    expect(text).toMatch(/^bounded_nodejs_active_handles\{type=/m);
  });

  it("sources narrows a scrape to the web's own series or to the workers'", async () => {
    const kind = unique("kind");
    const worker = createMetrics(new Registry(), { defaultMetrics: false });
    worker.disableScrapeTimeGauges();
    worker.jobsReaped.inc({ kind });
    await putWorkerSnapshot(worker.registry, 4444);
    const web = createMetrics(new Registry(), { defaultMetrics: false, countStuck: async () => ({}) });
    web.jobsReaped.inc({ kind }, 2);
    const only = async (sources: "web" | "workers") => (await renderMetrics({ metrics: web, sources })).text;
    expect(sample(await only("web"), "bounded_jobs_reaped_total", { kind, process: "web" })).toBe(2);
    expect(
      sample(await only("web"), "bounded_jobs_reaped_total", { kind, process: "workers-fake-worker-host-4444" }),
    ).toBeUndefined();
    expect(
      sample(await only("workers"), "bounded_jobs_reaped_total", { kind, process: "workers-fake-worker-host-4444" }),
    ).toBe(1);
    expect(sample(await only("workers"), "bounded_jobs_reaped_total", { kind, process: "web" })).toBeUndefined();
  });

  it("every labelled counter has a series at 0 for every label value the catalog knows, before its first event", async () => {
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => ({}),
      callAllowances: async () => [],
    });
    const text = await m.registry.metrics();
    for (const kind of JOB_KINDS) {
      expect(sample(text, "bounded_jobs_reaped_total", { kind }), kind).toBe(0);
      expect(sample(text, "bounded_job_items_failed_total", { kind }), kind).toBe(0);
      for (const status of TERMINAL_STATUSES)
        expect(sample(text, "bounded_jobs_finished_total", { kind, status }), `${kind} ${status}`).toBe(0);
    }
    expect(sample(text, "bounded_jobs_finished_total", { kind: "csv_import", status: "running" })).toBeUndefined();
    expect(
      sample(text, "bounded_rate_limit_reschedules_total", { queue: "marketplace-sync", family: "statistics" }),
    ).toBe(0);
    expect(sample(text, "bounded_rate_limit_reschedules_total", { queue: "imports", family: "provider:model" })).toBe(
      0,
    );
    expect(sample(text, "bounded_rate_limit_reschedules_total", { queue: "documents", family: "provider:ocr" })).toBe(
      0,
    );
    expect(sample(text, "bounded_provider_waits_total", { provider: "ocr" })).toBe(0);
    expect(sample(text, "bounded_reserves_reclaimed_total", { kind: "dislike" })).toBe(0);
    expect(sample(text, "bounded_reserve_late_releases_total", { kind: "generate", resolution: "debt" })).toBe(0);
    // The first event is an increase from that 0.
    m.jobsReaped.inc({ kind: "bulk_ocr" });
    expect(sample(await m.registry.metrics(), "bounded_jobs_reaped_total", { kind: "bulk_ocr" })).toBe(1);
  });

  it("durations are observed in production seconds: at time scale 0.1 a call of 0.55 s is 5.5 s", async () => {
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      timeScale: 0.1,
      countStuck: async () => ({}),
      callAllowances: async () => [],
    });
    m.observeModelCall({ queue: "imports", jobKind: "csv_import", outcome: "ok", durationMs: 550 });
    m.observeRequest({ method: "GET", route: "/api/jobs/[id]", status: 200, seconds: 0.55 });
    const text = await m.registry.metrics();
    const call = { queue: "imports", kind: "csv_import", outcome: "ok", type: "model" };
    expect(sample(text, "bounded_model_call_duration_seconds_sum", call)).toBeCloseTo(5.5, 6);
    expect(sample(text, "bounded_model_call_duration_seconds_bucket", { ...call, le: "5" })).toBe(0);
    expect(sample(text, "bounded_model_call_duration_seconds_bucket", { ...call, le: "7.5" })).toBe(1);
    const request = { method: "GET", route: "/api/jobs/[id]", status: "200" };
    expect(sample(text, "bounded_http_requests_total", request)).toBe(1);
    expect(sample(text, "bounded_http_request_duration_seconds_sum", request)).toBeCloseTo(5.5, 6);
  });

  it("counts the calls cut by their job's deadline beside the durations, from 0 at a kind's first call", async () => {
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => ({}),
      callAllowances: async () => [],
    });
    const labels = { queue: "imports", kind: "csv_import", type: "model" };
    m.observeModelCall({ queue: "imports", jobKind: "csv_import", outcome: "ok", durationMs: 5 });
    expect(sample(await m.registry.metrics(), "bounded_model_calls_cut_by_deadline_total", labels)).toBe(0);
    m.observeModelCall({
      queue: "imports",
      jobKind: "csv_import",
      outcome: "aborted",
      durationMs: 5,
      cutByDeadline: true,
    });
    m.observeModelCall({
      queue: "imports",
      jobKind: "csv_import",
      outcome: "aborted",
      durationMs: 5,
      cutByDeadline: false,
    });
    m.observeModelCall({ queue: "imports", jobKind: "csv_import", outcome: "aborted", durationMs: 5 });
    const text = await m.registry.metrics();
    expect(sample(text, "bounded_model_calls_cut_by_deadline_total", labels)).toBe(1);
    expect(sample(text, "bounded_model_call_duration_seconds_count", { ...labels, outcome: "aborted" })).toBe(3);
  });

  it("bounded_jobs_stuck is computed at scrape time from the injected counter and never added up across sources", async () => {
    const kind = unique("stuck");
    let calls = 0;
    let stuck = 1;
    const web = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => {
        calls += 1;
        return { [kind]: stuck };
      },
    });
    expect(calls).toBe(0);
    const first = (await renderMetrics({ metrics: web })).text;
    expect(sample(first, "bounded_jobs_stuck", { kind })).toBe(1);
    expect(sample(first, "bounded_jobs_stuck", { kind: "csv_import" })).toBe(0); // every catalog kind has a series
    stuck = 4;
    expect(sample((await renderMetrics({ metrics: web })).text, "bounded_jobs_stuck", { kind })).toBe(4);
    expect(calls).toBe(2);

    // A source that did report the gauge (another web process, say) reads the same database.
    const other = createMetrics(new Registry(), { defaultMetrics: false, countStuck: async () => ({ [kind]: 4 }) });
    await putWorkerSnapshot(other.registry, 4343);
    expect(sample((await renderMetrics({ metrics: web })).text, "bounded_jobs_stuck", { kind })).toBe(4);
  });

  it("a failing stuck counter leaves the gauge empty and the scrape up", async () => {
    const kind = unique("kind");
    const web = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => {
        throw new Error("database is down");
      },
    });
    web.jobsFinished.inc({ kind, status: "failed" });
    const { text } = await renderMetrics({ metrics: web });
    expect(sample(text, "bounded_jobs_finished_total", { kind, status: "failed" })).toBe(1);
    expect(text).not.toMatch(/^bounded_jobs_stuck\{/m);
  });

  it("without Redis the web still serves its own metrics", async () => {
    const kind = unique("kind");
    const web = createMetrics(new Registry(), { defaultMetrics: false, countStuck: async () => ({}) });
    web.jobsFinished.inc({ kind, status: "completed" });
    const dead = new Redis({
      host: "127.0.0.1",
      port: 1,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    });
    try {
      const { text } = await renderMetrics({ metrics: web, connection: dead });
      expect(sample(text, "bounded_jobs_finished_total", { kind, status: "completed" })).toBe(1);
    } finally {
      dead.disconnect();
    }
  });
});

describe("startMetricsPublisher", () => {
  it("publishes the registry under metrics:<host>:<pid> with a TTL, without counting stuck jobs, and removes it when stopped", async () => {
    const kind = unique("kind");
    let stuckCalls = 0;
    const worker = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => {
        stuckCalls += 1;
        return { [kind]: 9 };
      },
    });
    worker.jobsFinished.inc({ kind, status: "completed" }, 7);
    const k = snapshotKey();
    expect(k).toBe(`${env().BOUNDED_REDIS_PREFIX}:metrics:${(await import("node:os")).hostname()}:${process.pid}`);
    keys.push(k);

    const stop = startMetricsPublisher("workers", { metrics: worker, intervalMs: 1_000 });
    try {
      await expect.poll(() => redis().exists(k), { timeout: 5_000 }).toBe(1);
      const ttl = await redis().pttl(k);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(3_000);
      const snapshot = JSON.parse((await redis().get(k))!) as MetricsSnapshot;
      expect(snapshot).toMatchObject({ role: "workers", pid: process.pid });
      // It is what the web merges.
      const web = createMetrics(new Registry(), { defaultMetrics: false, countStuck: async () => ({}) });
      expect(
        sample((await renderMetrics({ metrics: web })).text, "bounded_jobs_finished_total", {
          kind,
          status: "completed",
        }),
      ).toBe(7);
      // Later increments are picked up by the next publication.
      worker.jobsFinished.inc({ kind, status: "completed" });
      await expect
        .poll(
          async () =>
            sample((await renderMetrics({ metrics: web })).text, "bounded_jobs_finished_total", {
              kind,
              status: "completed",
            }),
          { timeout: 5_000 },
        )
        .toBe(8);
    } finally {
      await stop();
    }
    expect(await redis().exists(k)).toBe(0);
    expect(stuckCalls).toBe(0);
  });
});

describe("recordModelCall", () => {
  it("observes the call's duration in bounded_model_call_duration_seconds", async () => {
    const queue = unique("queue");
    queues.push(queue);
    // 12 s of production time, as measured at this process's time scale.
    await recordModelCall({
      queue,
      jobKind: "csv_import",
      model: "sim-model",
      startedAt: new Date(),
      durationMs: scaled(12_000),
      outcome: "error",
      error: "HTTP 500",
    });
    await flushModelCallRecords();
    const text = await processMetrics().registry.metrics();
    const labels = { queue, kind: "csv_import", outcome: "error", type: "model" };
    expect(sample(text, "bounded_model_call_duration_seconds_count", labels)).toBe(1);
    expect(sample(text, "bounded_model_call_duration_seconds_bucket", { ...labels, le: "10" })).toBe(0);
    expect(sample(text, "bounded_model_call_duration_seconds_bucket", { ...labels, le: "15" })).toBe(1);
    expect(await db().modelCall.count({ where: { queue } })).toBe(1);

    // A tool call carries its type into the label.
    await recordModelCall({
      queue,
      jobKind: "agent_run",
      type: "tool",
      model: "lookup_invoice",
      startedAt: new Date(),
      durationMs: 30 * env().BOUNDED_TIME_SCALE,
      outcome: "ok",
    });
    await flushModelCallRecords();
    const after = await processMetrics().registry.metrics();
    expect(
      sample(after, "bounded_model_call_duration_seconds_bucket", {
        queue,
        kind: "agent_run",
        outcome: "ok",
        type: "tool",
        le: "0.05",
      }),
    ).toBe(1);
  });
});
