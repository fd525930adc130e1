import "server-only";
import { z } from "zod";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { listOverdueDelayedJobs, type OverdueDelayedJob } from "@/lib/reports/stuck";
import { reapGraceMs } from "@/lib/jobs/liveness";
import { logger } from "@/lib/log";
import { BUCKETS, FAMILIES, toProductionMs, type Family } from "@/lib/ratelimit/buckets";
import { limiter, type BucketState } from "@/lib/ratelimit/limiter";
import { readProviderStates, type ProviderState } from "@/lib/ratelimit/provider";

const log = logger("ratelimit.report");

/** The windows the limiter page offers, with the width of one bar of the chart. */
export const LIMITER_RANGES = {
  "1h": { ms: 3600_000, stepMs: 60_000, label: "hour", step: "minute" },
  "24h": { ms: 24 * 3600_000, stepMs: 15 * 60_000, label: "24 hours", step: "15 minutes" },
  "7d": { ms: 7 * 24 * 3600_000, stepMs: 2 * 3600_000, label: "7 days", step: "2 hours" },
} as const;
export type LimiterRange = keyof typeof LIMITER_RANGES;

export const limiterQuerySchema = z.object({
  range: z.enum(Object.keys(LIMITER_RANGES) as [LimiterRange, ...LimiterRange[]]).default("24h"),
});

/** One bar of the chart: reschedules in one step, per series (`queue · family`). */
export interface ReschedulePoint {
  at: string;
  counts: Record<string, number>;
}

export interface SeriesSummary {
  key: string;
  queue: string;
  family: string;
  reschedules: number;
  /** Production seconds the rescheduled jobs waited in all. */
  waitSeconds: number;
  maxWaitSeconds: number;
}

export interface TenantLoss {
  tenant: string;
  reschedules: number;
  waitSeconds: number;
  families: string[];
}

export interface BucketView {
  family: Family;
  capacity: number;
  refillPerWindow: number;
  windowSeconds: number;
  why: string;
}

export interface BucketStateView {
  scope: string;
  family: Family;
  tenant: string;
  tokens: number;
  capacity: number;
  /** Production seconds until a whole token is there; 0 when one is. */
  nextTokenSeconds: number;
  /** Production seconds until the bucket is full again. */
  fullSeconds: number;
}

export interface DelayedJobView {
  id: string;
  kind: string;
  queue: string;
  tenant: string;
  message: string | null;
  wakeUpAt: string | null;
  /** Production seconds until it is due back (negative: past due). */
  dueInSeconds: number | null;
  reschedules: number;
  processed: number;
  total: number | null;
  /** Still delayed long after its wake-up time (flagged by the reaper). */
  overdue: boolean;
  queueState: string | null;
}

export interface LimiterReport {
  range: LimiterRange;
  asOf: string;
  timeScale: number;
  window: { from: string; to: string; stepSeconds: number; stepLabel: string; rangeLabel: string };
  series: SeriesSummary[];
  points: ReschedulePoint[];
  totals: { reschedules: number; waitSeconds: number };
  topTenants: TenantLoss[];
  buckets: BucketView[];
  /** Buckets used recently (state in Redis), emptiest first; null when Redis cannot be read. */
  bucketStates: BucketStateView[] | null;
  delayed: DelayedJobView[];
  /** The reaper's grace in production seconds: a delayed job this far past its wake-up time is flagged. */
  overdueAfterSeconds: number;
  /**
   * Each outside provider's shared limits and use now (in flight of C, tokens of the burst at R
   * per production second) and its wait counters; null when Redis cannot be read.
   */
  providers: ProviderState[] | null;
}

const seriesKey = (queue: string, family: string) => `${queue} · ${family}`;

/**
 * Everything `/limiter` and `GET /api/limiter` show, in production units: reschedules over time
 * by queue and family (from the per-minute rollup the reschedule wrapper keeps), the tenants that
 * lost the most time waiting, the bucket specs and the state of the buckets used recently, and the
 * jobs waiting in *delayed* with their wake-up times.
 */
export async function getLimiterReport(
  query: z.input<typeof limiterQuerySchema> = {},
  now = new Date(),
): Promise<LimiterReport> {
  const { range } = limiterQuerySchema.parse(query);
  const span = limiterWindow(range, now);
  const scale = env().BOUNDED_TIME_SCALE;

  // Started first, read last: Redis only, so it runs beside the database reads.
  const providersRead = readProviderStates();
  const [rollup, delayedRows, bucketStates, overdue] = await Promise.all([
    readRollup(span),
    readDelayedJobs(),
    readBucketStates(scale),
    listOverdueDelayedJobs(200, now),
  ]);
  const providers = await providersRead;

  const series = seriesSummaries(rollup.perSeries);
  return {
    range,
    asOf: now.toISOString(),
    timeScale: scale,
    window: {
      from: span.from.toISOString(),
      to: span.to.toISOString(),
      stepSeconds: span.stepSeconds,
      stepLabel: span.spec.step,
      rangeLabel: span.spec.label,
    },
    series,
    points: reschedulePoints(rollup.perStep, span),
    totals: {
      reschedules: series.reduce((n, s) => n + s.reschedules, 0),
      waitSeconds: series.reduce((n, s) => n + s.waitSeconds, 0),
    },
    topTenants: tenantLosses(rollup.perTenant),
    buckets: bucketViews(),
    bucketStates,
    delayed: delayedJobViews(delayedRows, overdue, now, scale),
    overdueAfterSeconds: reapGraceMs() / scale / 1000,
    providers,
  };
}

/** The span a report covers and the width of its bars. */
interface LimiterWindow {
  spec: (typeof LIMITER_RANGES)[LimiterRange];
  from: Date;
  to: Date;
  stepSeconds: number;
}

/** The range's window, in steps of its bar width, up to the end of the current step. */
function limiterWindow(range: LimiterRange, now: Date): LimiterWindow {
  const spec = LIMITER_RANGES[range];
  // Whole steps, so bars line up with the clock; the window covers the current partial step.
  const to = new Date(Math.floor(now.getTime() / spec.stepMs) * spec.stepMs + spec.stepMs);
  const from = new Date(to.getTime() - spec.ms);
  return { spec, from, to, stepSeconds: spec.stepMs / 1000 };
}

/** The rollup over the window: reschedules per step and series, per series, and the ten tenants that waited most. */
async function readRollup({ from, to, stepSeconds }: LimiterWindow) {
  const [perStep, perSeries, perTenant] = await Promise.all([
    db().$queryRaw<{ step: Date; queue: string; family: string; n: bigint }[]>`
      SELECT to_timestamp(floor(extract(epoch FROM minute) / ${stepSeconds}) * ${stepSeconds}) AT TIME ZONE 'UTC' AS step,
             queue, family, sum(reschedules)::bigint AS n
      FROM "RateLimitRollup"
      WHERE minute >= ${from}::timestamptz AT TIME ZONE 'UTC' AND minute < ${to}::timestamptz AT TIME ZONE 'UTC'
      GROUP BY 1, 2, 3 ORDER BY 1`,
    db().rateLimitRollup.groupBy({
      by: ["queue", "family"],
      where: { minute: { gte: from, lt: to } },
      _sum: { reschedules: true, waitMs: true },
      _max: { maxWaitMs: true },
    }),
    db().$queryRaw<{ tenant: string; reschedules: bigint; waitMs: bigint; families: string[] }[]>`
      SELECT tenant, sum(reschedules)::bigint AS reschedules, sum("waitMs")::bigint AS "waitMs", array_agg(DISTINCT family ORDER BY family) AS families
      FROM "RateLimitRollup"
      WHERE minute >= ${from}::timestamptz AT TIME ZONE 'UTC' AND minute < ${to}::timestamptz AT TIME ZONE 'UTC'
      GROUP BY tenant ORDER BY 3 DESC, 2 DESC LIMIT 10`,
  ]);
  return { perStep, perSeries, perTenant };
}

type Rollup = Awaited<ReturnType<typeof readRollup>>;

/** The jobs waiting in *delayed* (at most 200), the next to wake up first. */
function readDelayedJobs() {
  return db().job.findMany({
    where: { status: "delayed" },
    orderBy: [{ wakeUpAt: "asc" }],
    take: 200,
    select: {
      id: true,
      kind: true,
      queue: true,
      message: true,
      wakeUpAt: true,
      reschedules: true,
      processed: true,
      total: true,
      tenant: { select: { slug: true } },
    },
  });
}

/** Each series' reschedules and waits over the window, the most rescheduled first. */
function seriesSummaries(perSeries: Rollup["perSeries"]): SeriesSummary[] {
  return perSeries
    .map((g) => ({
      key: seriesKey(g.queue, g.family),
      queue: g.queue,
      family: g.family,
      reschedules: g._sum.reschedules ?? 0,
      waitSeconds: Number(g._sum.waitMs ?? 0n) / 1000,
      maxWaitSeconds: (g._max.maxWaitMs ?? 0) / 1000,
    }))
    .sort((a, b) => b.reschedules - a.reschedules);
}

/** One bar per step of the window, steps with no reschedules included. */
function reschedulePoints(perStep: Rollup["perStep"], { spec, from, to }: LimiterWindow): ReschedulePoint[] {
  const byStep = new Map<number, Record<string, number>>();
  for (const r of perStep) {
    const counts = byStep.get(r.step.getTime()) ?? {};
    counts[seriesKey(r.queue, r.family)] = Number(r.n);
    byStep.set(r.step.getTime(), counts);
  }
  const points: ReschedulePoint[] = [];
  for (let t = from.getTime(); t < to.getTime(); t += spec.stepMs)
    points.push({ at: new Date(t).toISOString(), counts: byStep.get(t) ?? {} });
  return points;
}

/** The tenants that lost the most time waiting, in production seconds. */
function tenantLosses(perTenant: Rollup["perTenant"]): TenantLoss[] {
  return perTenant.map((t) => ({
    tenant: t.tenant,
    reschedules: Number(t.reschedules),
    waitSeconds: Number(t.waitMs) / 1000,
    families: t.families,
  }));
}

/** Each family's bucket spec, with why it is so. */
function bucketViews(): BucketView[] {
  return FAMILIES.map((family) => ({
    family,
    capacity: BUCKETS[family].capacity,
    refillPerWindow: BUCKETS[family].refillPerWindow,
    windowSeconds: BUCKETS[family].windowMs / 1000,
    why: BUCKETS[family].why,
  }));
}

/** The delayed jobs with their wake-up times in production seconds, those the reaper flagged overdue marked. */
function delayedJobViews(
  rows: Awaited<ReturnType<typeof readDelayedJobs>>,
  overdue: OverdueDelayedJob[],
  now: Date,
  scale: number,
): DelayedJobView[] {
  const overdueById = new Map(overdue.map((o) => [o.id, o]));
  return rows.map((d) => ({
    id: d.id,
    kind: d.kind,
    queue: d.queue,
    tenant: d.tenant.slug,
    message: d.message,
    wakeUpAt: d.wakeUpAt?.toISOString() ?? null,
    dueInSeconds: d.wakeUpAt ? (d.wakeUpAt.getTime() - now.getTime()) / scale / 1000 : null,
    reschedules: d.reschedules,
    processed: d.processed,
    total: d.total,
    overdue: overdueById.has(d.id),
    queueState: overdueById.get(d.id)?.queueState ?? null,
  }));
}

/** The buckets with state in Redis (used within their refill time), emptiest first; null when Redis cannot be read. */
async function readBucketStates(scale: number, limit = 50): Promise<BucketStateView[] | null> {
  try {
    const l = limiter();
    const scopes = await l.listActiveScopes(limit);
    const states = await Promise.all(scopes.map((s) => l.peekBucket(s)));
    // Provider buckets (`provider:model`) have a section of their own; these are the tenants'.
    return states
      .filter((s): s is BucketState & { family: Family } => s.family !== "provider")
      .map((s) => ({
        scope: s.scope,
        family: s.family,
        tenant: s.tenant,
        tokens: s.tokens,
        capacity: s.capacity,
        nextTokenSeconds: toProductionMs(s.nextTokenInMs, scale) / 1000,
        fullSeconds: toProductionMs(s.fullInMs, scale) / 1000,
      }))
      .sort((a, b) => a.tokens / a.capacity - b.tokens / b.capacity || a.scope.localeCompare(b.scope));
  } catch (err) {
    log.warn({ err }, "could not read the rate-limit buckets for the limiter page");
    return null;
  }
}
