import { randomBytes, randomUUID } from "node:crypto";
import { Registry } from "prom-client";
import { afterAll, describe, expect, it } from "vitest";
import { catalogPairs } from "@/lib/queues/catalog";
import { closeDb, db } from "@/lib/db/client";
import { createMetrics } from "@/lib/metrics/metrics";
import { DATABASE_SOURCES } from "@/lib/metrics/sources";
import { getPerItemBudget } from "@/lib/modelcalls/queries";
import { sweepPolicy } from "@/lib/quota/settings";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";

/**
 * The two gauges the alert rules and the board compare against: the per-item budget (the
 * reference line of /model-calls) and the reserve sweep window. Both are read at scrape time, by
 * the process that serves `GET /api/metrics`.
 */

const tenantSlug = `ops-${randomUUID().slice(0, 8)}`;
const created: string[] = [];

afterAll(async () => {
  await db().job.deleteMany({ where: { id: { in: created } } });
  await closeDb();
});

async function values(registry: Registry, name: string) {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return metric?.values ?? [];
}

describe("bounded_item_budget_seconds", () => {
  it("is, for every queue and kind of the catalog, the per-item budget /model-calls draws, in seconds", async () => {
    const tenantId = await ensureTenant(tenantSlug);
    // Typical csv_import jobs on imports, so at least that pair has a budget to report.
    for (const total of [40, 50, 60]) {
      const job = await db().job.create({
        data: { kind: "csv_import", queue: "imports", tenantId, total, budgetSoftMs: 600_000, budgetHardMs: 900_000, budgetSource: "test", progressToken: randomBytes(16).toString("hex") },
        select: { id: true },
      });
      created.push(job.id);
    }
    const m = createMetrics(new Registry(), { defaultMetrics: false, countStuck: async () => ({}), itemBudgets: DATABASE_SOURCES.itemBudgets });
    const reported = await values(m.registry, "bounded_item_budget_seconds");

    const expected = [];
    for (const { queue, kind } of catalogPairs()) {
      const budget = await getPerItemBudget(kind, queue);
      if (budget) expected.push({ labels: { queue, kind }, value: budget.perItemMs / 1000 });
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
      itemBudgets: async () => {
        if (fail) throw new Error("database is down");
        return [{ queue: "agent-interactive", kind: "agent_run", seconds: 6 }];
      },
    });
    expect(await values(m.registry, "bounded_item_budget_seconds")).toEqual([{ labels: { queue: "agent-interactive", kind: "agent_run" }, value: 6 }]);
    fail = true;
    expect(await values(m.registry, "bounded_item_budget_seconds")).toEqual([]);
  });

  it("is not reported by a process that publishes to Redis (a worker): the web computes it once", async () => {
    let calls = 0;
    const m = createMetrics(new Registry(), {
      defaultMetrics: false,
      countStuck: async () => ({}),
      itemBudgets: async () => {
        calls += 1;
        return [{ queue: "imports", kind: "csv_import", seconds: 12 }];
      },
    });
    m.disableScrapeTimeGauges();
    expect(await values(m.registry, "bounded_item_budget_seconds")).toEqual([]);
    expect(calls).toBe(0);
  });
});

describe("bounded_reserve_sweep_window_seconds", () => {
  it("is the sweeper's window this process uses, in production seconds", async () => {
    const m = createMetrics(new Registry(), { defaultMetrics: false, countStuck: async () => ({}), itemBudgets: async () => [] });
    expect(await values(m.registry, "bounded_reserve_sweep_window_seconds")).toEqual([{ labels: {}, value: sweepPolicy().windowMs / 1000 }]);
  });
});
