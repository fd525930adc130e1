import { resolveBudgetUnchecked } from "@/lib/budgets/budgets";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { livePresences } from "./presence";
import { kindsOfQueue, QUEUE_NAMES, type QueueName } from "@/lib/catalog/catalog";
import type { QueueGaugeReading } from "@/lib/metrics/metrics";
import { pausedQueues } from "./pause";
import { queue } from "./queues";

/**
 * What each queue of the catalog is doing now: the figures of the Queues page, of
 * `GET /api/queues` and of the `bounded_queue_*` gauges. Where each figure comes from:
 * - waiting / active / delayed / failed: BullMQ, the queue's own view. Waiting is what a worker
 *   will pick up next (waiting + prioritized: every job is added with a priority); active is a
 *   worker slot held; failed is the queue's failed set (kept 7 days). The Job table says why a
 *   job ended (timed out, stopped, failed): that is /jobs.
 * - oldest waiting: the Job table, rows `queued` (the product's truth: what the customer sees as
 *   waiting), since they last entered the queue (`heartbeatAt`, set when a retry or an interrupted
 *   run queues a row again; `createdAt` for a fresh one). BullMQ's own timestamp would need every
 *   waiting job read, since the fairness priorities put the oldest anywhere in the line.
 * - throughput and drain: the Job table, rows that completed (with or without item errors) per
 *   minute of the last hour; the drain projection divides the waiting count by the last 10 minutes'.
 * - slots: the live workers' presence (`<prefix>:workers:<host>:<pid>`, with the queues they
 *   consume and their concurrency) for the total; BullMQ's active count for the busy ones.
 * - top tenants: the Job table (BullMQ does not know tenants).
 * - paused: ./pause.ts (BullMQ's flag, with who and since when).
 * Ages and the drain time are production seconds (wall-clock ÷ BOUNDED_TIME_SCALE); throughput
 * is per minute of wall-clock time, the rate the machines really achieve.
 */

export const QUEUE_STATES = ["waiting", "active", "delayed", "failed"] as const;
export type QueueState = (typeof QUEUE_STATES)[number];

/** Minutes of throughput drawn. */
export const THROUGHPUT_MINUTES = 60;
/** Minutes the drain projection averages over: recent enough to follow a change, long enough not to jump. */
export const RECENT_MINUTES = 10;
const TOP_TENANTS = 5;

const COMPLETED = ["completed", "completed_with_errors"];

export interface QueueOverview {
  queue: QueueName;
  counts: Record<QueueState, number>;
  /** Production seconds the oldest queued row has waited; null when none waits. */
  oldestWaitingSeconds: number | null;
  /** The smallest soft budget of the queue's kinds (environment overrides included), production seconds. */
  softBudgetSeconds: number;
  throughput: {
    /** Completed per minute, oldest minute first, the last one being the current minute. */
    perMinute: number[];
    lastHour: number;
    /** Completed per minute over the last RECENT_MINUTES. */
    recentPerMinute: number;
  };
  slots: { busy: number; total: number; workers: number };
  drain:
    | { state: "empty" }
    | { state: "paused" }
    | { state: "not-draining" }
    /** Production seconds to empty the waiting jobs at the recent throughput. */
    | { state: "draining"; seconds: number };
  topTenants: { tenant: string; waiting: number }[];
  /** Who paused it and since when (ISO); null when it runs. */
  paused: { by: string; since: string } | null;
}

export interface QueuesOverview {
  asOf: string;
  timeScale: number;
  /** Live worker processes (any queue). */
  workers: number;
  queues: QueueOverview[];
}

async function bullCounts(name: QueueName): Promise<Record<QueueState, number>> {
  const c = await queue(name).getJobCounts("waiting", "prioritized", "active", "delayed", "failed");
  return {
    waiting: (c.waiting ?? 0) + (c.prioritized ?? 0),
    active: c.active ?? 0,
    delayed: c.delayed ?? 0,
    failed: c.failed ?? 0,
  };
}

/** Production seconds the oldest `queued` row of each queue has waited (queues with none are absent). */
async function oldestQueued(now: Date, scale: number): Promise<Map<string, number>> {
  const rows = await db().$queryRaw<{ queue: string; waitedMs: number }[]>`
    SELECT j.queue, extract(epoch FROM ((${now}::timestamptz AT TIME ZONE 'UTC') - min(coalesce(j."heartbeatAt", j."createdAt")))) * 1000 AS "waitedMs"
    FROM "Job" j
    WHERE j.status = 'queued'::"JobStatus"
      -- A split job waits for its parts, not for a worker.
      AND NOT EXISTS (SELECT 1 FROM "Job" c WHERE c."parentId" = j.id)
    GROUP BY j.queue`;
  return new Map(rows.map((r) => [r.queue, Math.max(0, Number(r.waitedMs)) / scale / 1000]));
}

function budgetSeconds(name: QueueName): number {
  const kinds = kindsOfQueue(name);
  // Unchecked: a budget the workers would refuse to start with is theirs to report (/budgets);
  // the queue figures must still be shown.
  const softs = (kinds.length > 0 ? kinds : [undefined]).map((kind) => resolveBudgetUnchecked(name, kind).softMs);
  return Math.min(...softs) / 1000;
}

/**
 * The figures the `bounded_queue_*` gauges need, one read per scrape, for every queue of the
 * catalog; a queue with nothing queued has waited 0 s.
 */
export async function readQueueGauges(now: Date = new Date()): Promise<QueueGaugeReading[]> {
  const [rows, paused] = await Promise.all([readQueues(now), pausedQueues()]);
  return rows.map((r) => ({ ...r, oldestWaitingSeconds: r.oldestWaitingSeconds ?? 0, paused: paused.has(r.queue) }));
}

async function readQueues(now: Date): Promise<
  {
    queue: QueueName;
    counts: Record<QueueState, number>;
    oldestWaitingSeconds: number | null;
    softBudgetSeconds: number;
  }[]
> {
  const [counts, oldest] = await Promise.all([
    Promise.all(QUEUE_NAMES.map(bullCounts)),
    oldestQueued(now, env().BOUNDED_TIME_SCALE),
  ]);
  return QUEUE_NAMES.map((name, i) => ({
    queue: name,
    counts: counts[i]!,
    oldestWaitingSeconds: oldest.get(name) ?? null,
    softBudgetSeconds: budgetSeconds(name),
  }));
}

/** Projected production seconds to empty the waiting jobs, or why there is no such number. */
export function projectDrain(
  waiting: number,
  recentPerMinute: number,
  paused: boolean,
  scale: number,
): QueueOverview["drain"] {
  if (waiting === 0) return { state: "empty" };
  if (paused) return { state: "paused" };
  if (recentPerMinute <= 0) return { state: "not-draining" };
  return { state: "draining", seconds: ((waiting / recentPerMinute) * 60) / scale };
}

/** The Queues page and `GET /api/queues`: every queue of the catalog, in catalog order. */
export async function getQueuesOverview(now: Date = new Date()): Promise<QueuesOverview> {
  const scale = env().BOUNDED_TIME_SCALE;
  const since = new Date(now.getTime() - THROUGHPUT_MINUTES * 60_000);
  const [rows, presences, completedRows, tenantRows, paused] = await Promise.all([
    readQueues(now),
    livePresences(),
    db().$queryRaw<{ queue: string; ago: number; n: number }[]>`
      SELECT queue, floor(extract(epoch FROM ((${now}::timestamptz AT TIME ZONE 'UTC') - "finishedAt")) / 60)::int AS ago, count(*)::int AS n
      FROM "Job"
      WHERE status = ANY(${COMPLETED}::"JobStatus"[])
        AND "finishedAt" > (${since}::timestamptz AT TIME ZONE 'UTC') AND "finishedAt" <= (${now}::timestamptz AT TIME ZONE 'UTC')
      GROUP BY 1, 2`,
    db().$queryRaw<{ queue: string; tenant: string; n: number }[]>`
      SELECT queue, tenant, n FROM (
        SELECT j.queue, t.slug AS tenant, count(*)::int AS n, row_number() OVER (PARTITION BY j.queue ORDER BY count(*) DESC, t.slug) AS rank
        FROM "Job" j JOIN "Tenant" t ON t.id = j."tenantId"
        WHERE j.status = 'queued'::"JobStatus"
        GROUP BY j.queue, t.slug
      ) ranked
      WHERE rank <= ${TOP_TENANTS}
      ORDER BY queue, rank`,
    pausedQueues(),
  ]);

  const queues = rows.map((g): QueueOverview => {
    const perMinute = new Array<number>(THROUGHPUT_MINUTES).fill(0);
    for (const r of completedRows)
      if (r.queue === g.queue && r.ago >= 0 && r.ago < THROUGHPUT_MINUTES)
        perMinute[THROUGHPUT_MINUTES - 1 - r.ago]! += r.n;
    const lastHour = perMinute.reduce((a, b) => a + b, 0);
    const recentPerMinute = perMinute.slice(-RECENT_MINUTES).reduce((a, b) => a + b, 0) / RECENT_MINUTES;
    const consuming = presences.filter((p) => p.queues.includes(g.queue));
    const pause = paused.get(g.queue);
    return {
      queue: g.queue,
      counts: g.counts,
      oldestWaitingSeconds: g.oldestWaitingSeconds,
      softBudgetSeconds: g.softBudgetSeconds,
      throughput: { perMinute, lastHour, recentPerMinute },
      slots: {
        busy: g.counts.active,
        total: consuming.reduce((n, p) => n + p.concurrency, 0),
        workers: consuming.length,
      },
      drain: projectDrain(g.counts.waiting, recentPerMinute, pause !== undefined, scale),
      topTenants: tenantRows.filter((r) => r.queue === g.queue).map((r) => ({ tenant: r.tenant, waiting: r.n })),
      paused: pause ? { by: pause.by, since: pause.since.toISOString() } : null,
    };
  });
  return { asOf: now.toISOString(), timeScale: scale, workers: presences.length, queues };
}
