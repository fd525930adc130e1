import { resolveBudget } from "@/lib/budgets/budgets";
import { itemsInFlight, kindSpec } from "@/lib/catalog/catalog";
import { db, Prisma } from "@/lib/db/client";
import { env, type Env } from "@/lib/env";
import { providerLimits } from "@/lib/ratelimit/buckets";

/**
 * The call allowance of a kind: what one model call may take, on average, for a typical job of
 * the kind to finish inside its soft budget — given its items, how many items one call carries,
 * and how many calls go at once. A job's calls go in rounds: a typical job makes
 * `ceil(items ÷ items per call)` calls, `calls at once` of them side by side (its items in flight
 * ÷ items per call, at most the provider's concurrency), so it waits out `ceil(calls ÷ calls at
 * once)` rounds one after another; the budget divided by the rounds is what each may take.
 *
 * Not a row's share of the budget: an import of 88 rows, eight to a call and 32 calls at once, is
 * one round, so a call may take the whole budget; an agent run of 6 steps is 6 rounds (each step
 * waits for the last). It is the reference of /model-calls (the dashed line), of
 * `bounded_call_allowance_seconds{queue,kind}` and of the latency alert (ops/prometheus/alerts.yml).
 */
export interface CallShape {
  /** Items one model call carries (the kind's batch), and the model calls a typical job makes. */
  itemsPerCall: number;
  callsPerJob: number;
  /** Calls of one job side by side: its items in flight ÷ items per call, at most the provider's concurrency. */
  callsAtOnce: number;
  /** Calls one after another: `ceil(callsPerJob ÷ callsAtOnce)`. */
  rounds: number;
}

/** How a typical job of `kind` with `items` items calls the model (pure: the catalog and the environment). */
export function callShape(kind: string, items: number, e: Env = env()): CallShape {
  const spec = kindSpec(kind);
  const itemsPerCall = Math.max(1, spec?.modelBatch?.size ?? 1);
  const provider = spec?.provider === "model" || spec?.provider === "ocr" ? spec.provider : null;
  const concurrency = provider ? providerLimits(provider, e).concurrency : Infinity;
  const callsAtOnce = Math.max(1, Math.min(Math.floor(itemsInFlight(kind, e) / itemsPerCall), concurrency));
  const callsPerJob = Math.max(1, Math.ceil(items / itemsPerCall));
  return { itemsPerCall, callsPerJob, callsAtOnce, rounds: Math.ceil(callsPerJob / callsAtOnce) };
}

export interface CallAllowance extends CallShape {
  /** `softMs ÷ rounds`: what one model call may take on average for a typical job to fit its budget. */
  allowanceMs: number;
  /** The queue whose budget was used. */
  queue: string;
  softMs: number;
  budgetSource: string;
  /** Median `total` of the kind's jobs created in the last 7 days: the typical job. */
  medianItems: number;
  /** How many jobs that median is taken over. */
  jobs: number;
}

/** How far back the "typical job" of a kind is looked for. */
const TYPICAL_JOB_WINDOW_MS = 7 * 24 * 3_600_000;

/**
 * The call allowance of `kind` on `queue` (when given; else the queue most of its jobs ran on —
 * `agent_run` runs on two, with different budgets), from the median size of its jobs created in
 * the last 7 days. Null when unknown: no job of the kind with a known size in that window, or a
 * budget configuration `resolveBudget` refuses (the budgets page says why).
 */
export async function getCallAllowance(
  kind: string,
  queue?: string,
  now: Date = new Date(),
): Promise<CallAllowance | null> {
  const since = new Date(now.getTime() - TYPICAL_JOB_WINDOW_MS).toISOString();
  const onQueue = queue ? Prisma.sql`AND j."queue" = ${queue}` : Prisma.empty;
  const [row] = await db().$queryRaw<{ median: number | null; jobs: number; queue: string | null }[]>`
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY j."total")::float8 AS median,
           count(*)::int AS jobs,
           mode() WITHIN GROUP (ORDER BY j."queue") AS queue
    FROM "Job" j
    WHERE j."kind" = ${kind} AND j."total" > 0 AND j."createdAt" >= ${since}::timestamp ${onQueue}`;
  if (!row || row.median === null || !(Number(row.median) > 0) || !row.queue) return null;
  const budgetQueue = queue ?? row.queue;
  let budget: ReturnType<typeof resolveBudget>;
  try {
    budget = resolveBudget(budgetQueue, kind);
  } catch {
    // An invalid budget configuration: the budgets page names the problem; no line is drawn here.
    return null;
  }
  const medianItems = Number(row.median);
  const shape = callShape(kind, medianItems);
  return {
    ...shape,
    allowanceMs: Math.round(budget.softMs / shape.rounds),
    queue: budgetQueue,
    softMs: budget.softMs,
    budgetSource: budget.source,
    medianItems,
    jobs: Number(row.jobs),
  };
}
