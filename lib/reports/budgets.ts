import "server-only";
import { db } from "@/lib/db/client";
import { env, type Env } from "@/lib/env";
import { withinBucketMs } from "@/lib/modelcalls/buckets";
import { listP99Buckets } from "@/lib/modelcalls/queries";
import { catalogPairs, KINDS, type JobKind } from "@/lib/catalog/catalog";
import { budgetProblem, budgetProblems, resolveBudgetUnchecked, type ResolvedBudget } from "@/lib/budgets/budgets";
import { formatDuration } from "@/lib/format/duration";
import { formatCompactRate } from "@/lib/format/rate";
import { formatBudget } from "@/lib/budgets/format";
import type { RedisClient } from "@/lib/redis/client";
import { listWorkerBudgets } from "@/lib/budgets/runtime";
import { isSplittable, projectItems, SAFETY_FACTOR, type Projection } from "@/lib/projection/projection";
import type { WorkerBudgets } from "@/lib/budgets/schemas";
import { formatCount } from "@/lib/format/number";

/** How far back the risk looks: a week covers weekday and weekend load and last week's month-end batch. */
const RISK_WINDOW_DAYS = 7;
/**
 * Fewer model calls than this in the window and their 99th percentile is little more than the
 * slowest few: the risk is not judged from them (a kind's first two jobs are no sample).
 */
export const MIN_CALLS_TO_JUDGE = 100;
/** Reading the live workers must not hold the page when Redis is unreachable. */
const REDIS_READ_TIMEOUT_MS = 3_000;

export interface LiveWorker {
  /** `host:pid` */
  id: string;
  host: string;
  pid: number;
  concurrency: number;
  queues: string[];
  timeScale: number;
  startedAt: string;
  publishedAt: string;
  /** Milliseconds since its last publication (wall clock). */
  ageMs: number;
}

export interface RuntimeBudget {
  worker: string;
  softMs: number;
  hardMs: number;
  source: string;
  why: string;
}

export interface Drift {
  type: "workers_disagree" | "differs_from_configuration";
  /** "Live workers disagree" / "Runtime differs from configuration". */
  title: string;
  /** What differs, naming the workers and the numbers. */
  detail: string;
  /** `title: detail` — the whole reason in one sentence. */
  message: string;
}

function makeDrift(type: Drift["type"], title: string, detail: string): Drift {
  return { type, title, detail, message: `${title}: ${detail}` };
}

export interface RiskEstimate {
  /** `total` of the job (the largest or the median of the window). */
  items: number;
  /**
   * Production ms: the p99 of the job's calls one after another (`sequentialP99Ms`), or, for kinds
   * whose items are in flight together and which split themselves, the projection
   * (lib/projection/projection.ts).
   */
  expectedMs: number;
  /** expectedMs ÷ soft budget; above 1 the job is expected to time out. */
  ratio: number;
}

export interface BudgetRisk {
  /** `splits`: its largest job would overrun, and splits itself into parts that fit (projected kinds). */
  status: "at_risk" | "ok" | "splits" | "no_data";
  atRisk: boolean;
  /** The soft budget compared against, and whether live workers or the configuration gave it. */
  softMs: number;
  basis: "runtime" | "configuration";
  /** Jobs of this queue and kind created in the window with a known total. */
  jobs: number;
  /** Items processed (applied + failed) by jobs created in the window. */
  itemsProcessed: number;
  /** Model calls recorded in the window. */
  calls: number;
  callsPerItem: number | null;
  /** p99 of one model call, production ms (recorded durations ÷ BOUNDED_TIME_SCALE). */
  p99CallMs: number | null;
  /** The mean model call, production ms. */
  meanCallMs: number | null;
  largest: RiskEstimate | null;
  median: RiskEstimate | null;
  /** One sentence an on-call engineer can act on. */
  summary: string;
}

export interface BudgetRow {
  queue: string;
  kind: string;
  /** What one item of this kind is called ("row", "document"). */
  noun: string;
  /** What this process resolves from its own environment. */
  configuration: ResolvedBudget & { problem: string | null };
  /** What each live worker serving this queue reports. */
  runtime: RuntimeBudget[];
  /** "ok": every live worker serving it uses the configuration; "drift": see `drift`; "not_served": no live worker runs this queue. */
  status: "ok" | "drift" | "not_served";
  drift: Drift[];
  risk: BudgetRisk;
}

export interface BudgetReport {
  generatedAt: string;
  /** BOUNDED_TIME_SCALE of this process; budgets are shown unscaled (production ms). */
  timeScale: number;
  windowDays: number;
  /** validateBudgets' problems under this process's environment (workers would refuse to start). */
  configurationProblems: string[];
  /** Set when the live workers could not be read (Redis down); `workers` is then empty. */
  workersError: string | null;
  workers: LiveWorker[];
  rows: BudgetRow[];
}

export interface BudgetReportOptions {
  /** @defaultValue `env()` */
  source?: Env;
  /** @defaultValue the shared producer connection */
  redis?: RedisClient;
  /** Key prefix of the worker publications. @defaultValue `key("worker-budgets")` */
  namespace?: string;
  /** @defaultValue `new Date()` */
  now?: Date;
}

/** What the live workers published, or why they could not be read (Redis down or slow): never a throw. */
function readPublished(options: BudgetReportOptions): Promise<{ workers: WorkerBudgets[]; error: string | null }> {
  return withTimeout(
    listWorkerBudgets({ redis: options.redis, namespace: options.namespace }),
    REDIS_READ_TIMEOUT_MS,
  ).then(
    (workers) => ({ workers, error: null as string | null }),
    (err: unknown) => ({
      workers: [] as WorkerBudgets[],
      error: `Could not read the live workers from Redis: ${err instanceof Error ? err.message : String(err)}`,
    }),
  );
}

/** A live worker as the page lists it, with the age of its last publication. */
function liveWorkerOf(w: WorkerBudgets, now: Date): LiveWorker {
  return {
    id: `${w.host}:${w.pid}`,
    host: w.host,
    pid: w.pid,
    concurrency: w.concurrency,
    queues: w.queues,
    timeScale: w.timeScale,
    startedAt: w.startedAt,
    publishedAt: w.publishedAt,
    ageMs: Math.max(0, now.getTime() - Date.parse(w.publishedAt)),
  };
}

type Projected = Map<string, { largest: Projection; median: Projection }>;

/** The projections of the largest and the median job of every kind that is projected and split at its start. */
async function projectedPairs(
  pairs: { queue: string; kind: JobKind }[],
  stats: Map<string, PairStats>,
  now: Date,
): Promise<Projected> {
  // Kinds that are projected and split at their start are judged the same way here.
  const projected: Projected = new Map();
  await Promise.all(
    pairs.map(async ({ queue, kind }) => {
      const s = stats.get(`${queue}\0${kind}`);
      if (!isSplittable(kind) || !s || s.itemsMax === null || s.itemsMedian === null) return;
      const [largest, median] = await Promise.all([
        projectItems(kind, s.itemsMax, now),
        projectItems(kind, s.itemsMedian, now),
      ]);
      if (largest && median) projected.set(`${queue}\0${kind}`, { largest, median });
    }),
  );
  return projected;
}

/** One (queue, kind)'s row: its configured budget, what each live worker uses, their drift, and its risk. */
function budgetRow(
  { queue, kind }: { queue: string; kind: JobKind },
  source: Env,
  workers: WorkerBudgets[],
  stats: Map<string, PairStats>,
  projected: Projected,
): BudgetRow {
  const resolved = resolveBudgetUnchecked(queue, kind, source);
  const configuration = { ...resolved, problem: budgetProblem(queue, kind, resolved) };
  const runtime: RuntimeBudget[] = workers.flatMap((w) =>
    w.budgets
      .filter((b) => b.queue === queue && b.kind === kind)
      .map((b) => ({
        worker: `${w.host}:${w.pid}`,
        softMs: b.softMs,
        hardMs: b.hardMs,
        source: b.source,
        why: b.why,
      })),
  );
  const drift = findDrift(configuration, runtime);
  const status = runtime.length === 0 ? "not_served" : drift.length > 0 ? "drift" : "ok";
  const effective = effectiveSoft(configuration, runtime);
  const pairStats = stats.get(`${queue}\0${kind}`) ?? EMPTY_STATS;
  const projection = projected.get(`${queue}\0${kind}`);
  const risk = projection
    ? assessProjectedRisk(
        assessRisk(pairStats, effective, source.BOUNDED_TIME_SCALE, kind, KINDS[kind].noun),
        projection,
        source.BOUNDED_AUTO_SPLIT,
        KINDS[kind].noun,
      )
    : assessRisk(pairStats, effective, source.BOUNDED_TIME_SCALE, kind, KINDS[kind].noun);
  return { queue, kind, noun: KINDS[kind].noun, configuration, runtime, status, drift, risk };
}

/**
 * The budgets page and `GET /api/budgets`: for every (queue, kind) of the catalog, what this
 * process's environment resolves, what each live worker really uses, where they drift, and
 * whether recent jobs fit their soft budget at the p99 of recorded model calls.
 */
export async function getBudgetReport(options: BudgetReportOptions = {}): Promise<BudgetReport> {
  const source = options.source ?? env();
  const now = options.now ?? new Date();
  const pairs = catalogPairs();

  const [published, stats] = await Promise.all([readPublished(options), riskStats(pairs, now)]);
  const workers: LiveWorker[] = published.workers.map((w) => liveWorkerOf(w, now));
  const projected = await projectedPairs(pairs, stats, now);
  const rows = pairs.map((pair) => budgetRow(pair, source, published.workers, stats, projected));

  return {
    generatedAt: now.toISOString(),
    timeScale: source.BOUNDED_TIME_SCALE,
    windowDays: RISK_WINDOW_DAYS,
    configurationProblems: budgetProblems(source),
    workersError: published.error,
    workers,
    rows,
  };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${formatDuration(ms)}`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

const sameNumbers = (a: { softMs: number; hardMs: number }, b: { softMs: number; hardMs: number }) =>
  a.softMs === b.softMs && a.hardMs === b.hardMs;

/** Drift in words: live workers that disagree with each other, and workers that differ from the configuration. */
function findDrift(configuration: ResolvedBudget, runtime: RuntimeBudget[]): Drift[] {
  const drift: Drift[] = [];
  const groups = new Map<string, RuntimeBudget[]>();
  for (const r of runtime) {
    const k = `${r.softMs}/${r.hardMs}`;
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  if (groups.size > 1) {
    const parts = [...groups.values()].map(
      (g) =>
        `${g.map((r) => r.worker).join(", ")} ${g.length > 1 ? "use" : "uses"} ${formatBudget(g[0]!)} (${g[0]!.source})`,
    );
    drift.push(makeDrift("workers_disagree", "Live workers disagree", `${parts.join("; ")}.`));
  }
  const differing = runtime.filter((r) => !sameNumbers(r, configuration));
  if (differing.length > 0) {
    const who =
      differing.length === runtime.length && groups.size === 1
        ? `${runtime.length === 1 ? "the only live worker" : `all ${runtime.length} live workers`} (${runtime.map((r) => r.worker).join(", ")}) ${runtime.length === 1 ? "uses" : "use"} ${formatBudget(runtime[0]!)} (${runtime[0]!.source})`
        : differing.map((r) => `${r.worker} uses ${formatBudget(r)} (${r.source})`).join("; ");
    drift.push(
      makeDrift(
        "differs_from_configuration",
        "Runtime differs from configuration",
        `${who}, but this web process's environment resolves ${formatBudget(configuration)} (${configuration.source}).`,
      ),
    );
  }
  return drift;
}

/**
 * The soft budget jobs really get: the live workers' when they agree, the smallest when they
 * disagree (a job may land on any of them), the configuration when no worker serves the queue.
 */
function effectiveSoft(
  configuration: ResolvedBudget,
  runtime: RuntimeBudget[],
): { softMs: number; basis: "runtime" | "configuration" } {
  if (runtime.length === 0) return { softMs: configuration.softMs, basis: "configuration" };
  return { softMs: Math.min(...runtime.map((r) => r.softMs)), basis: "runtime" };
}

interface PairStats {
  jobs: number;
  itemsMax: number | null;
  itemsMedian: number | null;
  itemsProcessed: number;
  calls: number;
  /** The 99th percentile call, interpolated in its bucket as `/model-calls` shows it (recorded ms). */
  p99CallMs: number | null;
  /** The mean call (recorded ms). */
  meanCallMs: number | null;
}

const EMPTY_STATS: PairStats = {
  jobs: 0,
  itemsMax: null,
  itemsMedian: null,
  itemsProcessed: 0,
  calls: 0,
  p99CallMs: null,
  meanCallMs: null,
};

/**
 * Per (queue, kind): job sizes from the Job table and the p99 model-call bucket from the hourly
 * rollup, both aggregated in PostgreSQL. A kind that runs on one queue only counts all of its
 * calls (also those recorded without a queue); a kind on several queues (agent_run: batch and
 * interactive have very different sizes and budgets) is split by queue.
 */
async function riskStats(pairs: { queue: string; kind: JobKind }[], now: Date): Promise<Map<string, PairStats>> {
  const since = new Date(now.getTime() - RISK_WINDOW_DAYS * 86_400_000).toISOString();
  const until = now.toISOString();
  const queues = pairs.map((p) => p.queue);
  const kinds = pairs.map((p) => p.kind);
  const anyQueue = pairs.map((p) => KINDS[p.kind].queues.length === 1);

  const [jobRows, callRows] = await Promise.all([
    db().$queryRaw<
      {
        queue: string;
        kind: string;
        jobs: number;
        itemsMax: number | null;
        itemsMedian: number | null;
        itemsProcessed: number;
      }[]
    >`
      SELECT t.queue, t.kind,
             count(j.total)::int AS "jobs",
             max(j.total)::float8 AS "itemsMax",
             percentile_cont(0.5) WITHIN GROUP (ORDER BY j.total) AS "itemsMedian",
             coalesce(sum(j.processed + j.failed), 0)::float8 AS "itemsProcessed"
      FROM unnest(${queues}::text[], ${kinds}::text[], ${anyQueue}::boolean[]) AS t(queue, kind, any_queue)
      LEFT JOIN "Job" j
        ON j.kind = t.kind AND (t.any_queue OR j.queue = t.queue)
       AND j."createdAt" >= (${since}::timestamptz AT TIME ZONE 'UTC')
       AND j."createdAt" < (${until}::timestamptz AT TIME ZONE 'UTC')
      GROUP BY t.queue, t.kind`,
    listP99Buckets(
      pairs.map((p, i) => ({ kind: p.kind, queue: anyQueue[i] ? undefined : p.queue, pair: p })),
      { since: new Date(since), until: now },
      ["model"],
    ),
  ]);

  const stats = new Map<string, PairStats>();
  for (const r of jobRows) {
    stats.set(`${r.queue}\0${r.kind}`, {
      ...EMPTY_STATS,
      jobs: r.jobs,
      itemsMax: r.itemsMax,
      itemsMedian: r.itemsMedian,
      itemsProcessed: r.itemsProcessed,
    });
  }
  for (const r of callRows) {
    const k = `${r.scope.pair.queue}\0${r.scope.pair.kind}`;
    stats.set(k, {
      ...(stats.get(k) ?? EMPTY_STATS),
      calls: r.calls,
      p99CallMs: withinBucketMs(r.bucket, (Math.ceil(0.99 * r.calls) - r.below) / r.inBucket, r.maxMs),
      meanCallMs: r.meanMs,
    });
  }
  return stats;
}

function assessRisk(
  s: PairStats,
  budget: { softMs: number; basis: "runtime" | "configuration" },
  timeScale: number,
  kind: string,
  noun: string,
): BudgetRisk {
  const base = {
    softMs: budget.softMs,
    basis: budget.basis,
    jobs: s.jobs,
    itemsProcessed: s.itemsProcessed,
    calls: s.calls,
  };
  const noData = (summary: string): BudgetRisk => ({
    ...base,
    status: "no_data",
    atRisk: false,
    callsPerItem: null,
    p99CallMs: null,
    meanCallMs: null,
    largest: null,
    median: null,
    summary,
  });
  const week = `in the last ${RISK_WINDOW_DAYS} days`;
  if (s.jobs === 0 || s.itemsMax === null || s.itemsMedian === null)
    return noData(`No ${kind} job with a known size ${week}.`);
  if (s.calls === 0 || s.p99CallMs === null || s.meanCallMs === null)
    return noData(`No model call recorded for ${kind} ${week}.`);
  if (s.calls < MIN_CALLS_TO_JUDGE)
    return noData(
      `Too few model calls to judge: ${formatCount(s.calls)} recorded for ${kind} ${week}; a p99 needs ${MIN_CALLS_TO_JUDGE}.`,
    );
  if (s.itemsProcessed === 0)
    return noData(`Model calls recorded but no ${noun} processed ${week}: calls per ${noun} unknown.`);

  // Recorded durations are wall-clock in a possibly scaled system; budgets are production ms.
  const p99CallMs = s.p99CallMs / timeScale;
  const meanCallMs = Math.min(s.meanCallMs / timeScale, p99CallMs);
  const callsPerItem = s.calls / s.itemsProcessed;
  const estimate = (items: number): RiskEstimate => {
    const expectedMs = sequentialP99Ms(items * callsPerItem, meanCallMs, p99CallMs);
    return { items, expectedMs, ratio: expectedMs / budget.softMs };
  };
  const largest = estimate(s.itemsMax);
  const median = estimate(s.itemsMedian);
  const atRisk = largest.ratio > 1;
  const items = (n: number) => `${formatCount(Math.round(n))} ${noun}${Math.round(n) === 1 ? "" : "s"}`;
  const soft = `the ${formatDuration(budget.softMs)} soft budget`;
  const calls = `${formatCount(Math.round(largest.items * callsPerItem))} calls one after another, mean ${formatDuration(meanCallMs)}, p99 ${formatDuration(p99CallMs)}`;
  const needs = `needs ${formatDuration(largest.expectedMs)} at p99 (${calls})`;
  const summary = atRisk
    ? `At risk: the largest job (${items(largest.items)}) ${needs}, ${formatRatio(largest.ratio)} ${soft}` +
      (median.ratio > 1
        ? `; even the median job (${items(median.items)}) needs ${formatDuration(median.expectedMs)}.`
        : `; the median job (${items(median.items)}) fits.`)
    : `Fits: the largest job (${items(largest.items)}) ${needs}, ${formatRatio(largest.ratio)} ${soft}.`;
  return {
    ...base,
    status: atRisk ? "at_risk" : "ok",
    atRisk,
    callsPerItem,
    p99CallMs,
    meanCallMs,
    largest,
    median,
    summary,
  };
}

/**
 * The 99th percentile of the sum of `calls` calls made one after another, from one call's mean and
 * p99: n × mean + (p99 − mean) × √n (a sum's spread grows with √n, its mean with n). One call is
 * its p99; twenty calls are not twenty p99 calls, which together happen far less than once in a
 * hundred jobs. For long-tailed calls it errs on the safe side of a count of the slow ones.
 */
export function sequentialP99Ms(calls: number, meanMs: number, p99Ms: number): number {
  if (calls <= 0) return 0;
  return calls * meanMs + (p99Ms - meanMs) * Math.sqrt(calls);
}

/**
 * The risk of a kind that is projected at its start: its largest and median jobs at the projected
 * rate (items in flight, the provider's limits, what an item costs end to end) rather than one
 * item after another. With automatic splitting on, a job projected past its budget runs as parts
 * that each fit: not at risk, and the summary says so.
 */
function assessProjectedRisk(
  risk: BudgetRisk,
  p: { largest: Projection; median: Projection },
  autoSplit: boolean,
  noun: string,
): BudgetRisk {
  if (risk.status === "no_data") return risk;
  const estimate = (q: Projection): RiskEstimate => ({ items: q.items, expectedMs: q.ms, ratio: q.ms / risk.softMs });
  const largest = estimate(p.largest);
  const median = estimate(p.median);
  const items = (n: number) => `${formatCount(Math.round(n))} ${noun}${Math.round(n) === 1 ? "" : "s"}`;
  const soft = `the ${formatDuration(risk.softMs)} soft budget`;
  const projectedAt = `projected at ${formatDuration(largest.expectedMs)} (≈ ${formatCompactRate(p.largest.itemsPerSecond, noun)}, ${p.largest.limit}), ${formatRatio(largest.ratio)} ${soft}`;
  const over = largest.ratio > SAFETY_FACTOR;
  const atRisk = !autoSplit && largest.ratio > 1;
  const summary = !over
    ? `Fits: the largest job (${items(largest.items)}) is ${projectedAt}.`
    : autoSplit
      ? `Splits itself: the largest job (${items(largest.items)}) is ${projectedAt}, so it runs as parts that each fit.`
      : `${atRisk ? "At risk" : "Tight"}: the largest job (${items(largest.items)}) is ${projectedAt}, and automatic splitting is off (BOUNDED_AUTO_SPLIT=0).`;
  return {
    ...risk,
    status: atRisk ? "at_risk" : over && autoSplit ? "splits" : "ok",
    atRisk,
    largest,
    median,
    summary,
  };
}

/** "0.40×", "1.04×", "118×". */
export function formatRatio(ratio: number): string {
  return `${ratio >= 10 ? formatCount(Math.round(ratio)) : ratio.toFixed(2)}×`;
}
