import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { db } from "@/lib/db/client";
import { parseEnv, type Env } from "@/lib/env";
import { createRedis, type RedisClient } from "@/lib/redis/client";
import { lapsingRegistry } from "@/lib/redis/registry";
import { newProgressToken } from "@/lib/jobs/create";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { waitFor } from "@/test/helpers/wait";
import { getBudgetReport, MIN_CALLS_TO_JUDGE, sequentialP99Ms } from "@/lib/reports/budgets";
import { listWorkerBudgets, startBudgetPublisher, type BudgetPublisher } from "./runtime";

/**
 * Each test publishes under its own namespace, not under `key("worker-budgets")`: the test
 * prefix (`bounded-test`) is shared by every run on this machine, and real or other tests'
 * workers may be publishing there.
 */
const namespace = () => `budgets-it-${randomUUID()}:worker-budgets`;

/** A worker process's environment: defaults, the test time scale (publish every 1 s), plus `vars`. */
const workerEnv = (vars: Record<string, string> = {}): Env => parseEnv({ BOUNDED_TIME_SCALE: "0.001", ...vars });

let redis: RedisClient;
const publishers: BudgetPublisher[] = [];

beforeAll(() => {
  redis = createRedis("producer", { enableOfflineQueue: true });
});
afterEach(async () => {
  await Promise.all(publishers.splice(0).map((p) => p.stop()));
});
afterAll(async () => {
  await redis.quit();
});

async function publisher(
  ns: string,
  host: string,
  pid: number,
  queues: string[],
  source: Env,
): Promise<BudgetPublisher> {
  const p = await startBudgetPublisher({ queues, concurrency: 4, redis, namespace: ns, host, pid, source });
  publishers.push(p);
  return p;
}

/** Whether `id` is a live entry of the namespace's registry. */
const published = async (ns: string, id: string) => (await lapsingRegistry(ns).list(redis)).some((e) => e.id === id);

/** How long until `id`'s entry lapses, by Redis's clock. */
async function lapsesInMs(ns: string, id: string): Promise<number> {
  const [seconds, micros] = (await redis.time()) as [number | string, number | string];
  const at = Number(await redis.zscore(lapsingRegistry(ns).keys[0], id));
  return at - (Number(seconds) * 1000 + Math.floor(Number(micros) / 1000));
}

describe("what workers really use", () => {
  it("publishes host, pid, time scale, concurrency and the effective budget of each (queue, kind) it serves", async () => {
    const ns = namespace();
    await publisher(ns, "host-a", 101, ["imports", "agent-batch"], workerEnv({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "120" }));
    const [w, ...others] = await listWorkerBudgets({ redis, namespace: ns });
    expect(others).toEqual([]);
    expect(w).toMatchObject({
      host: "host-a",
      pid: 101,
      timeScale: 0.001,
      concurrency: 4,
      queues: ["imports", "agent-batch"],
    });
    expect(w!.budgets).toEqual([
      expect.objectContaining({
        queue: "imports",
        kind: "csv_import",
        softMs: 120_000,
        hardMs: 900_000,
        source: "env:BOUNDED_BUDGET_IMPORTS_SOFT_S",
      }),
      expect.objectContaining({ queue: "imports", kind: "category_reask", softMs: 120_000 }),
      expect.objectContaining({
        queue: "agent-batch",
        kind: "agent_run",
        softMs: 1_800_000,
        hardMs: 2_400_000,
        source: "queue:agent-batch",
      }),
    ]);
  });

  it("two live workers with different budgets for the same queue are flagged as disagreeing, naming both", async () => {
    const ns = namespace();
    await publisher(ns, "host-a", 101, ["imports"], workerEnv());
    await publisher(
      ns,
      "host-b",
      202,
      ["imports"],
      workerEnv({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "60", BOUNDED_BUDGET_IMPORTS_HARD_S: "90" }),
    );
    const report = await getBudgetReport({ redis, namespace: ns, source: parseEnv({}) });
    expect(report.workers.map((w) => w.id)).toEqual(["host-a:101", "host-b:202"]);
    const imports = report.rows.find((r) => r.queue === "imports" && r.kind === "csv_import")!;
    expect(imports.status).toBe("drift");
    const disagree = imports.drift.find((d) => d.type === "workers_disagree");
    expect(disagree?.message).toBe(
      "Live workers disagree: host-a:101 uses 10 min / 15 min (default); host-b:202 uses 1 min / 90 s (env:BOUNDED_BUDGET_IMPORTS_SOFT_S,BOUNDED_BUDGET_IMPORTS_HARD_S).",
    );
    // host-a matches this process's configuration; only host-b differs from it.
    const differs = imports.drift.find((d) => d.type === "differs_from_configuration");
    expect(differs?.message).toContain("host-b:202 uses 1 min / 90 s");
    expect(differs?.message).not.toContain("host-a:101");
    // A queue nobody serves is not drift, it is "not served".
    expect(report.rows.find((r) => r.queue === "documents")!.status).toBe("not_served");
  });

  it("a worker whose budget differs from this process's configuration is flagged; one that matches is not", async () => {
    const ns = namespace();
    const configuration = parseEnv({ BOUNDED_BUDGET_DOCUMENTS_SOFT_S: "300", BOUNDED_BUDGET_DOCUMENTS_HARD_S: "450" });
    // The worker was started without the override (its environment was not updated).
    await publisher(ns, "host-c", 303, ["documents", "imports"], workerEnv());
    const report = await getBudgetReport({ redis, namespace: ns, source: configuration });
    const documents = report.rows.find((r) => r.queue === "documents")!;
    expect(documents.status).toBe("drift");
    expect(documents.drift).toEqual([
      {
        type: "differs_from_configuration",
        title: "Runtime differs from configuration",
        detail:
          "the only live worker (host-c:303) uses 30 min / 40 min (queue:documents), but this web process's environment resolves 5 min / 7 min 30 s (env:BOUNDED_BUDGET_DOCUMENTS_SOFT_S,BOUNDED_BUDGET_DOCUMENTS_HARD_S).",
        message:
          "Runtime differs from configuration: the only live worker (host-c:303) uses 30 min / 40 min (queue:documents), but this web process's environment resolves 5 min / 7 min 30 s (env:BOUNDED_BUDGET_DOCUMENTS_SOFT_S,BOUNDED_BUDGET_DOCUMENTS_HARD_S).",
      },
    ]);
    const imports = report.rows.find((r) => r.queue === "imports")!;
    expect(imports.status).toBe("ok");
    expect(imports.drift).toEqual([]);
    expect(imports.runtime).toEqual([
      expect.objectContaining({ worker: "host-c:303", softMs: 600_000, source: "default" }),
    ]);
  });

  it("a stopped publisher disappears at once; a dead one expires after three publish intervals", async () => {
    const ns = namespace();
    const p = await publisher(ns, "host-d", 404, ["imports"], workerEnv());
    expect(await listWorkerBudgets({ redis, namespace: ns })).toHaveLength(1);
    // Publish interval at time scale 0.001 is the 1 s floor, so the entry lives 3 s.
    const ttl = await lapsesInMs(ns, p.id);
    expect(ttl).toBeGreaterThan(2_000);
    expect(ttl).toBeLessThanOrEqual(3_000);
    await p.stop();
    expect(await published(ns, p.id)).toBe(false);
    expect(await listWorkerBudgets({ redis, namespace: ns })).toEqual([]);
    const report = await getBudgetReport({ redis, namespace: ns, source: parseEnv({}) });
    expect(report.workers).toEqual([]);
    expect(report.rows.every((r) => r.status === "not_served")).toBe(true);
  });

  it("keeps publishing on its interval (a lost entry comes back)", async () => {
    const ns = namespace();
    const p = await publisher(ns, "host-e", 505, ["imports"], workerEnv());
    await lapsingRegistry(ns).remove(redis, p.id);
    const deleted = performance.now();
    await waitFor(() => published(ns, p.id), {
      timeoutMs: 10_000,
      what: "the publisher to write its entry again",
    });
    // Back within one publish interval (1 s at this time scale), with the same room as ever for a late tick.
    expect(performance.now() - deleted).toBeLessThan(1_300);
  });
});

describe("risk: budget against the p99 of a job's calls one after another, or the projection, from recorded calls", () => {
  // A random week in the 1990s that nobody else's rows fall in: the rollup keeps its counts even
  // after the ModelCall rows are deleted, so the window itself is what isolates this test.
  const now = new Date(Date.UTC(1990, 0, 10) + Math.floor(Math.random() * 3_000) * 86_400_000);
  const since = new Date(now.getTime() - 7 * 86_400_000);
  const inWindow = new Date(now.getTime() - 86_400_000);
  const slug = uniqueTenantSlug("budget-risk");
  /**
   * The p99 of the 260 calls below, as `/model-calls` reads it: the 258th call is the 3rd of the 5
   * in bucket 20 ([21.5 s, 31.6 s), slowest 30 s), so 3/5 of the way from 21.5 s to 30 s, geometrically.
   */
  const P99_MS = 10 * 10 ** (20 / 6) * (30_000 / (10 * 10 ** (20 / 6))) ** 0.6;

  async function job(kind: string, queue: string, total: number, createdAt: Date): Promise<string> {
    const tenant = await db().tenant.upsert({ where: { slug }, create: { slug }, update: {}, select: { id: true } });
    const row = await db().job.create({
      data: {
        kind,
        queue,
        tenantId: tenant.id,
        status: "completed",
        total,
        processed: total,
        budgetSoftMs: 600_000,
        budgetHardMs: 900_000,
        budgetSource: "default",
        progressToken: newProgressToken(),
        createdAt,
      },
      select: { id: true },
    });
    return row.id;
  }

  async function calls(jobId: string, kind: string, queue: string, durations: number[]): Promise<void> {
    // One statement; the rollup trigger counts every row.
    await db().modelCall.createMany({
      data: durations.map((durationMs) => ({
        jobId,
        jobKind: kind,
        queue,
        model: "test-model",
        type: "model" as const,
        startedAt: inWindow,
        durationMs,
        outcome: "ok" as const,
      })),
    });
  }

  beforeAll(async () => {
    // Two kinds, one sample: agent_run (steps one after another) and csv_import (rows in flight,
    // projected). Each: 3 jobs of 10, 20 and 100 items (130 items), 2 calls per item = 260 calls:
    // 255 at 100 ms and 5 at 30 s, so the 99th percentile call (the 258th) is a 30 s one.
    for (const [kind, queue] of [
      ["agent_run", "agent-batch"],
      ["csv_import", "imports"],
    ] as const) {
      const a = await job(kind, queue, 10, inWindow);
      await job(kind, queue, 20, inWindow);
      await job(kind, queue, 100, inWindow);
      await calls(a, kind, queue, [...Array<number>(255).fill(100), ...Array<number>(5).fill(30_000)]);
      // Outside the window: neither this huge job nor its calls count.
      const old = await job(kind, queue, 50_000, new Date(since.getTime() - 86_400_000));
      await db().modelCall.create({
        data: {
          jobId: old,
          jobKind: kind,
          queue,
          model: "test-model",
          type: "model",
          startedAt: new Date(since.getTime() - 2 * 3_600_000),
          durationMs: 600_000,
          outcome: "ok",
        },
      });
    }
    // marketplace_sync: 10 jobs of 10 pages, one call of 1 s per page (100 calls: enough to judge).
    for (let i = 0; i < 10; i++) {
      const id = await job("marketplace_sync", "marketplace-sync", 10, inWindow);
      await calls(id, "marketplace_sync", "marketplace-sync", Array<number>(10).fill(1_000));
    }
    // Tool calls are not model calls: a slow one must not move the p99.
    const any = await job("marketplace_sync", "marketplace-sync", 10, inWindow);
    await db().modelCall.create({
      data: {
        jobId: any,
        jobKind: "marketplace_sync",
        queue: "marketplace-sync",
        model: "tool",
        type: "tool",
        startedAt: inWindow,
        durationMs: 900_000,
        outcome: "ok",
      },
    });
  });

  afterAll(async () => {
    await deleteTenant(slug);
    const from = new Date(since.getTime() - 10 * 86_400_000);
    await db().$executeRaw`DELETE FROM "ModelCallRollup" WHERE "hour" >= ${from} AND "hour" < ${now}`;
    await db().$executeRaw`DELETE FROM "ModelCallRollupDay" WHERE "day" >= ${from}::date AND "day" <= ${now}::date`;
    await db().$executeRaw`DELETE FROM "ModelCallRollupWeek" WHERE "week" >= ${from}::date AND "week" <= ${now}::date`;
  });

  it("a kind whose largest job needs more than its soft budget at the p99 of its calls one after another is at risk, with the numbers", async () => {
    // 200 calls of mean 675 ms and p99 26.3 s: 200 × 0.675 s + 25.6 s × √200 ≈ 8 min 17 s, not 200 × 26.3 s.
    const source = parseEnv({ BOUNDED_BUDGET_AGENT_BATCH_SOFT_S: "300", BOUNDED_BUDGET_AGENT_BATCH_HARD_S: "600" });
    const report = await getBudgetReport({ redis, namespace: namespace(), source, now });
    const risk = report.rows.find((r) => r.queue === "agent-batch")!.risk;
    const largestMs = 200 * 675 + (P99_MS - 675) * Math.sqrt(200);
    const medianMs = 40 * 675 + (P99_MS - 675) * Math.sqrt(40);
    expect(risk).toMatchObject({
      status: "at_risk",
      atRisk: true,
      jobs: 3,
      itemsProcessed: 130,
      calls: 260,
      callsPerItem: 2,
      meanCallMs: 675, // (255 × 100 ms + 5 × 30 s) ÷ 260
      softMs: 300_000,
      basis: "configuration",
      largest: { items: 100 },
      median: { items: 20 },
    });
    expect(risk.p99CallMs).toBeCloseTo(P99_MS);
    expect(risk.largest!.expectedMs).toBeCloseTo(largestMs);
    expect(risk.median!.expectedMs).toBeCloseTo(medianMs);
    expect(risk.largest!.ratio).toBeCloseTo(largestMs / 300_000);
    expect(risk.summary).toBe(
      "At risk: the largest job (100 steps) needs 8 min 17 s at p99 (200 calls one after another, mean 675 ms, p99 26 s), 1.66× the 5 min soft budget; the median job (20 steps) fits.",
    );
    // With the default 30 min budget the same jobs fit: a long tail is not a sum of tails.
    const roomy = (await getBudgetReport({ redis, namespace: namespace(), source: parseEnv({}), now })).rows.find(
      (r) => r.queue === "agent-batch",
    )!.risk;
    expect(roomy).toMatchObject({ status: "ok", atRisk: false });
  });

  it("a kind with fewer calls than a p99 needs is not judged: its first jobs are no sample", async () => {
    // Two interactive runs of 2 steps whose 4 calls took 54 s each, against a 60 s budget.
    for (let i = 0; i < 2; i++) {
      const id = await job("agent_run", "agent-interactive", 2, inWindow);
      await calls(id, "agent_run", "agent-interactive", [54_000, 54_000]);
    }
    const report = await getBudgetReport({ redis, namespace: namespace(), source: parseEnv({}), now });
    const risk = report.rows.find((r) => r.queue === "agent-interactive")!.risk;
    expect(risk).toMatchObject({ status: "no_data", atRisk: false, jobs: 2, calls: 4 });
    expect(risk.summary).toBe(
      `Too few model calls to judge: 4 recorded for agent_run in the last 7 days; a p99 needs ${MIN_CALLS_TO_JUDGE}.`,
    );
  });

  it("the p99 of calls one after another: one call is its p99, many grow with the mean", () => {
    expect(sequentialP99Ms(0, 1_000, 5_000)).toBe(0);
    expect(sequentialP99Ms(1, 1_000, 5_000)).toBe(5_000);
    expect(sequentialP99Ms(4, 1_000, 5_000)).toBe(4 * 1_000 + 4_000 * 2);
    // Calls that always take the same time add up exactly.
    expect(sequentialP99Ms(10, 1_000, 1_000)).toBe(10_000);
  });

  it("a kind whose jobs fit is not flagged, and tool calls do not count", async () => {
    const report = await getBudgetReport({ redis, namespace: namespace(), source: parseEnv({}), now });
    const risk = report.rows.find((r) => r.queue === "marketplace-sync")!.risk;
    expect(risk).toMatchObject({
      status: "ok",
      atRisk: false,
      jobs: 11,
      calls: 100,
      callsPerItem: 100 / 110,
      p99CallMs: 1_000,
      meanCallMs: 1_000,
      largest: { items: 10 },
    });
  });

  it("a kind projected at its start is judged by its projection: one that splits itself is not at risk, unless splitting is off", async () => {
    const ns = namespace();
    // A live worker of the imports queue with a 60 s budget: the 100-row job cannot fit it.
    await publisher(
      ns,
      "host-g",
      707,
      ["imports"],
      workerEnv({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "60", BOUNDED_BUDGET_IMPORTS_HARD_S: "90" }),
    );
    const on = (await getBudgetReport({ redis, namespace: ns, source: parseEnv({}), now })).rows.find(
      (r) => r.queue === "imports",
    )!.risk;
    expect(on).toMatchObject({
      status: "splits",
      atRisk: false,
      softMs: 60_000,
      largest: { items: 100 },
      median: { items: 20 },
    });
    expect(on.largest!.ratio).toBeGreaterThan(0.7);
    expect(on.summary).toMatch(
      /^Splits itself: the largest job \(100 rows\) is projected at .+ \(≈ .+, (items in flight|provider calls in flight|provider request rate)\), [\d.]+× the 1 min soft budget, so it runs as parts that each fit\.$/,
    );
    const off = (
      await getBudgetReport({ redis, namespace: ns, source: parseEnv({ BOUNDED_AUTO_SPLIT: "0" }), now })
    ).rows.find((r) => r.queue === "imports")!.risk;
    expect(off).toMatchObject({ status: "at_risk", atRisk: true });
    expect(off.summary).toMatch(
      /^At risk: the largest job \(100 rows\) is projected at .+, and automatic splitting is off \(BOUNDED_AUTO_SPLIT=0\)\.$/,
    );
    // The configured 10 min: the same jobs fit.
    const roomy = (await getBudgetReport({ redis, namespace: namespace(), source: parseEnv({}), now })).rows.find(
      (r) => r.queue === "imports",
    )!.risk;
    expect(roomy).toMatchObject({ status: "ok", atRisk: false });
    expect(roomy.summary).toMatch(/^Fits: the largest job \(100 rows\) is projected at /);
  });

  it("kinds without jobs or calls in the window say so instead of guessing", async () => {
    const report = await getBudgetReport({ redis, namespace: namespace(), source: parseEnv({}), now });
    const sweeps = report.rows.find((r) => r.queue === "sweeps")!.risk;
    expect(sweeps.status).toBe("no_data");
    expect(sweeps.summary).toBe("No overdue_invoices job with a known size in the last 7 days.");
  });

  it("the risk is measured against the budget workers really use, and recorded durations are unscaled", async () => {
    const ns = namespace();
    // The live worker was given 1 h; this process's configuration says 30 min.
    await publisher(
      ns,
      "host-f",
      606,
      ["agent-batch"],
      workerEnv({ BOUNDED_BUDGET_AGENT_BATCH_SOFT_S: "3600", BOUNDED_BUDGET_AGENT_BATCH_HARD_S: "4800" }),
    );
    const report = await getBudgetReport({ redis, namespace: ns, source: parseEnv({}), now });
    expect(report.rows.find((r) => r.queue === "agent-batch")!.risk).toMatchObject({
      softMs: 3_600_000,
      basis: "runtime",
    });
    const largestMs = 200 * 675 + (P99_MS - 675) * Math.sqrt(200);
    expect(report.rows.find((r) => r.queue === "agent-batch")!.risk.largest!.ratio).toBeCloseTo(largestMs / 3_600_000);
    // At time scale 0.5 a recorded 30 s call stands for a 60 s production call, its mean for twice its own.
    const scaledReport = await getBudgetReport({
      redis,
      namespace: namespace(),
      source: parseEnv({ BOUNDED_TIME_SCALE: "0.5" }),
      now,
    });
    expect(scaledReport.rows.find((r) => r.queue === "agent-batch")!.risk).toMatchObject({
      meanCallMs: 1_350,
    });
    expect(scaledReport.rows.find((r) => r.queue === "agent-batch")!.risk.p99CallMs).toBeCloseTo(2 * P99_MS);
    expect(scaledReport.rows.find((r) => r.queue === "agent-batch")!.risk.largest!.expectedMs).toBeCloseTo(
      2 * largestMs,
    );
  });
});
