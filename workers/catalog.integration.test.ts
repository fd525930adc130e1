import { randomUUID } from "node:crypto";
import { Registry } from "prom-client";
import { afterAll, describe, expect, it } from "vitest";
import { getBudgetReport } from "@/lib/reports/budgets";
import { resolveBudget } from "@/lib/budgets/budgets";
import { ENV_VARIABLES, parseEnv } from "@/lib/env";
import { createMetrics } from "@/lib/metrics/metrics";
import {
  BUDGET_VARIABLES,
  budgetVariable,
  catalogPairs,
  JOB_KINDS,
  KINDS,
  kindsOfQueue,
  QUEUE_NAMES,
  QUEUES,
  RESCHEDULE_QUEUES,
} from "@/lib/catalog/catalog";
import { createRedis } from "@/lib/redis/client";
import { PROCESSORS, WORKER_QUEUES } from "./catalog";
import { DEMO_ACTIONS } from "./demo/traffic";
import { MAX_STARTED_ATTEMPTS, rescheduleWorkerOptions } from "@/lib/runs/reschedule";

/**
 * The catalog (lib/catalog/catalog.ts) is the one declaration of every queue and kind; these tests
 * walk it and prove that each place derived from it knows every entry — so adding a kind or a
 * queue there is all it takes, and nothing can disagree with it.
 */

const redis = createRedis("producer", { enableOfflineQueue: true });
afterAll(async () => {
  await redis.quit();
});

describe("the job catalog", () => {
  it("every queue's budget override is parsed by the environment and wins over the declaration, for every kind it runs", () => {
    expect(BUDGET_VARIABLES).toHaveLength(QUEUE_NAMES.length * 2);
    for (const queue of QUEUE_NAMES) {
      const soft = budgetVariable(queue, "SOFT");
      const hard = budgetVariable(queue, "HARD");
      expect(ENV_VARIABLES).toEqual(expect.arrayContaining([soft, hard]));
      const e = parseEnv({ [soft]: "1234", [hard]: "2345" });
      expect(kindsOfQueue(queue).length, `queue ${queue} runs no kind`).toBeGreaterThan(0);
      for (const kind of kindsOfQueue(queue)) {
        expect(resolveBudget(queue, kind, e)).toMatchObject({
          softMs: 1_234_000,
          hardMs: 2_345_000,
          source: `env:${soft},${hard}`,
        });
      }
    }
  });

  it("every kind runs on at least one declared queue, and every (queue, kind) pair appears once", () => {
    for (const kind of JOB_KINDS) {
      expect(KINDS[kind].queues.length).toBeGreaterThan(0);
      for (const queue of KINDS[kind].queues) expect(QUEUE_NAMES).toContain(queue);
    }
    const pairs = catalogPairs().map((p) => `${p.queue}/${p.kind}`);
    expect(new Set(pairs).size).toBe(pairs.length);
    expect(pairs.length).toBe(JOB_KINDS.reduce((n, kind) => n + KINDS[kind].queues.length, 0));
  });

  it("every kind has a processor and every queue a worker", () => {
    expect(Object.keys(PROCESSORS).sort()).toEqual([...JOB_KINDS].sort());
    for (const kind of JOB_KINDS) expect(typeof PROCESSORS[kind]).toBe("function");
    expect([...WORKER_QUEUES].sort()).toEqual([...QUEUE_NAMES].sort());
  });

  it("every (queue, kind) pair has a row on the budgets page, with the budget the catalog declares", async () => {
    const report = await getBudgetReport({
      redis,
      namespace: `catalog-${randomUUID()}:worker-budgets`,
      source: parseEnv({}),
    });
    expect(report.rows.map((r) => `${r.queue}/${r.kind}`)).toEqual(catalogPairs().map((p) => `${p.queue}/${p.kind}`));
    for (const row of report.rows) {
      const declared = resolveBudget(row.queue, row.kind, parseEnv({}));
      expect(row.configuration).toMatchObject({
        softMs: declared.softMs,
        hardMs: declared.hardMs,
        source: declared.source,
      });
      expect(row.noun).toBe(KINDS[row.kind as keyof typeof KINDS].noun);
    }
  });

  it("only the queues declared `reschedule` give their slot back, with the high start cap; every queue whose kinds wait for a limited service is one", () => {
    for (const queue of QUEUE_NAMES) {
      const waitsForLimits = kindsOfQueue(queue).some((kind) =>
        ["model", "ocr", "marketplace"].includes(KINDS[kind].provider),
      );
      if (waitsForLimits) expect(QUEUES[queue].policy, `queue ${queue}`).toBe("reschedule");
      const rescheduling = QUEUES[queue].policy === "reschedule";
      expect(RESCHEDULE_QUEUES.has(queue)).toBe(rescheduling);
      expect(rescheduleWorkerOptions(queue)).toEqual(rescheduling ? { maxStartedAttempts: MAX_STARTED_ATTEMPTS } : {});
    }
  });

  it("the demo starts every kind the catalog gives a demo weight, at that weight, and no other", () => {
    const inMix = JOB_KINDS.filter((kind) => KINDS[kind].demo.weight !== null);
    expect(DEMO_ACTIONS.map((a) => a.name).sort()).toEqual([...inMix].sort());
    for (const a of DEMO_ACTIONS) expect(a.weight).toBe(KINDS[a.name].demo.weight);
    // A kind left out of the mix says why.
    for (const kind of JOB_KINDS) {
      const demo = KINDS[kind].demo;
      if (demo.weight === null) expect(demo.why.length).toBeGreaterThan(20);
    }
  });

  it("every kind declares its item concurrency with a reason, and the metrics give every kind a series", async () => {
    for (const kind of JOB_KINDS) {
      expect(KINDS[kind].itemConcurrency.n).toBeGreaterThanOrEqual(1);
      expect(KINDS[kind].itemConcurrency.why.length).toBeGreaterThan(20);
    }
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => ({}),
      callAllowances: async () => [],
    });
    const stuck = (await m.registry.getMetricsAsJSON()).find((x) => x.name === "bounded_jobs_stuck");
    expect(stuck?.values.map((v) => v.labels.kind).sort()).toEqual([...JOB_KINDS].sort());
  });
});
