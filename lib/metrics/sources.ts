import { countStuckByKind } from "@/lib/jobs/stuck";
import { getPerItemBudget } from "@/lib/modelcalls/queries";
import { catalogPairs } from "@/lib/queues/catalog";
import { readQueueGauges } from "@/lib/queues/overview";
import { readBreakers } from "@/lib/ratelimit/breaker";
import { installScrapeSources, type ItemBudget, type ListItemBudgets, type ScrapeSources } from "./metrics";

/**
 * Where the scrape-time gauges read the database. Kept out of lib/metrics/metrics.ts so that the
 * metrics module imports no domain module: everything that records a metric (the job runtime,
 * the reaper) can import it without a cycle back through the readers.
 */

/**
 * The median job size a per-item budget divides by moves slowly (7 days of jobs), so one
 * computation serves every scrape for a minute instead of a median query per queue and kind on each.
 */
const ITEM_BUDGET_REFRESH_MS = 60_000;
let itemBudgetMemo: { at: number; value: Promise<ItemBudget[]> } | undefined;

const itemBudgetsFromJobs: ListItemBudgets = () => {
  if (itemBudgetMemo && Date.now() - itemBudgetMemo.at < ITEM_BUDGET_REFRESH_MS) return itemBudgetMemo.value;
  const value = (async () => {
    const budgets = await Promise.all(catalogPairs().map(async ({ queue, kind }) => ({ queue, kind, budget: await getPerItemBudget(kind, queue) })));
    return budgets.flatMap(({ queue, kind, budget }) => (budget ? [{ queue, kind, seconds: budget.perItemMs / 1000 }] : []));
  })();
  itemBudgetMemo = { at: Date.now(), value };
  // A failed computation is not remembered: the next scrape tries again.
  value.catch(() => {
    if (itemBudgetMemo?.value === value) itemBudgetMemo = undefined;
  });
  return value;
};

/** `bounded_jobs_stuck` from lib/jobs/stuck, `bounded_item_budget_seconds` from lib/modelcalls/queries, `bounded_queue_*` from lib/queues/overview, `bounded_outside_service_up` from the circuit breakers. */
export const DATABASE_SOURCES: Required<ScrapeSources> = {
  countStuck: countStuckByKind,
  itemBudgets: itemBudgetsFromJobs,
  queueGauges: () => readQueueGauges(),
  outsideServices: async () => (await readBreakers())?.map((b) => ({ service: b.service, up: b.state === "closed" })) ?? [],
};

/** Makes this process's metrics read the database at scrape time (the process that serves scrapes). */
export function useDatabaseSources(): void {
  installScrapeSources(DATABASE_SOURCES);
}
