import { z } from "zod";
import { db, Prisma } from "@/lib/db/client";
import { CALL_OUTCOMES, type CallOutcome } from "@/lib/core/call-outcomes";
import {
  BUCKET_COUNT,
  LAST_BUCKET,
  bucketFirstMs,
  bucketLowerMs,
  bucketUpperMs,
  summarizeCells,
  type BucketCell,
  type LatencySummary,
} from "./buckets";

/**
 * Reads for the model-call latency views (the /model-calls page and its API twin).
 *
 * Everything is aggregated in PostgreSQL from `ModelCallRollup` (per day: `ModelCallRollupDay`,
 * for the week and month views and the whole days of shorter ones; per ISO week:
 * `ModelCallRollupWeek`, for the whole weeks of the week and month views) — calls counted per hour ×
 * type × queue × kind × model × outcome × latency bucket by a trigger — so a month of ~100k
 * calls (or millions) is tens of thousands of rollup rows at most, and no call row ever reaches
 * JavaScript. Only aggregated rows come back — at most 34 buckets × 4 outcomes per call type and
 * filter match, plus one row per queue × kind × model seen — and percentiles are then read off
 * their cumulative counts (`estimatePercentile` in ./buckets).
 *
 * Used by server components, route handlers and the dashboard benchmark (plain Node), never by
 * the browser.
 */

export const LATENCY_RANGES = ["1h", "24h", "7d", "30d"] as const;
export type LatencyRange = (typeof LATENCY_RANGES)[number];
export const CALL_TYPES = ["model", "ocr", "tool"] as const;
/**
 * What a histogram can show: calls of each type, or whole items — one batch item from its dispatch
 * to its commit (its calls, its waits for a provider slot, its writes; lib/runs/item-costs.ts).
 */
export const HISTOGRAM_TYPES = [...CALL_TYPES, "item"] as const;
export type CallType = (typeof HISTOGRAM_TYPES)[number];

/** Each range in ms. */
export const RANGE_MS: Record<LatencyRange, number> = {
  "1h": 3_600_000,
  "24h": 24 * 3_600_000,
  "7d": 7 * 24 * 3_600_000,
  "30d": 30 * 24 * 3_600_000,
};

/** An optional filter value; an empty form field means "any". */
const filterValue = z
  .string()
  .trim()
  .max(200)
  .optional()
  .transform((v) => (v ? v : undefined));

/** The filters of the page and of `GET /api/model-calls/histogram`; unknown params are ignored. */
export const latencyHistogramQuerySchema = z.object({
  range: z.enum(LATENCY_RANGES).default("24h"),
  queue: filterValue,
  kind: filterValue,
  model: filterValue,
  type: z.enum(HISTOGRAM_TYPES).default("model"),
});
export type LatencyHistogramQuery = z.input<typeof latencyHistogramQuerySchema>;

export interface LatencyBucketRow {
  bucket: number;
  /** Inclusive lower edge in ms (0 for the first bucket, which also holds everything under 10 ms). */
  lowerMs: number;
  /** Exclusive upper edge in ms; null for the last bucket, which holds everything slower. */
  upperMs: number | null;
  count: number;
  byOutcome: Record<CallOutcome, number>;
}

export interface LatencyWindow {
  /** Start of the oldest hour row read (UTC, ISO). */
  from: string;
  /** The time of the query. */
  to: string;
  /** Minutes actually covered, `to − from`: more than the range asked for, by up to an hour. */
  coveredMinutes: number;
  /** Said when the coverage differs noticeably from the range (always for 1 h). */
  note: string | null;
}

export interface LatencyHistogram {
  range: LatencyRange;
  type: CallType;
  filters: { queue: string | null; kind: string | null; model: string | null };
  window: LatencyWindow;
  /** All 34 buckets, empty ones included, so charts keep a stable axis. */
  buckets: LatencyBucketRow[];
  /** The calls of `type` matching every filter. */
  summary: LatencySummary;
  /**
   * Tool calls in the same window, beside the model calls: queue and kind filters apply, the
   * model filter does not (a tool call's "model" is the tool's name).
   */
  tools: LatencySummary;
  /** Values seen in the window, for the filter menus (queues and kinds of any type, models of `type`). */
  options: { queues: string[]; kinds: string[]; models: string[] };
}

/** Start of the UTC hour containing `ms`. */
function floorHour(ms: number): number {
  return Math.floor(ms / 3_600_000) * 3_600_000;
}

/** Start of the UTC day containing `ms`. */
function floorDay(ms: number): number {
  return Math.floor(ms / 86_400_000) * 86_400_000;
}

/** The first Monday (UTC midnight, where ISO weeks and the week rollup's rows start) at or after the UTC midnight `d`. */
function firstMonday(d: Date): Date {
  return new Date(d.getTime() + ((8 - d.getUTCDay()) % 7) * 86_400_000);
}

/** The Monday (UTC midnight) that starts the ISO week holding `d`. */
function mondayOf(d: Date): Date {
  return new Date(floorDay(d.getTime()) - ((d.getUTCDay() + 6) % 7) * 86_400_000);
}

/** Week and month views read the day and week rollups; shorter ranges the hourly one. */
const DAILY: ReadonlySet<LatencyRange> = new Set(["7d", "30d"]);

/**
 * The hour rows a range reads: from the start of the hour that contains `now − range` up to now.
 * The rollup is hour-granular, so a range covers between its length and its length plus an hour;
 * for "1h" that means the previous and the current hour rows (60–120 minutes), which the response
 * says in `window`.
 */
function latencyWindow(range: LatencyRange, now: Date = new Date()): { from: Date; to: Date; window: LatencyWindow } {
  const to = now;
  const daily = DAILY.has(range);
  const from = new Date((daily ? floorDay : floorHour)(to.getTime() - RANGE_MS[range]));
  const coveredMinutes = Math.round((to.getTime() - from.getTime()) / 60_000);
  const extraMinutes = coveredMinutes - RANGE_MS[range] / 60_000;
  const note =
    range === "1h"
      ? `Counted per hour: this covers the last two hour rows, ${coveredMinutes} minutes (since ${from.toISOString().slice(11, 16)} UTC).`
      : daily
        ? `Counted per day: this covers since ${from.toISOString().slice(0, 10)} (UTC), ${(coveredMinutes / 1440).toFixed(1)} days.`
        : extraMinutes >= 1 && extraMinutes / (RANGE_MS[range] / 60_000) > 0.02
          ? `Counted per hour: this covers ${coveredMinutes} minutes.`
          : null;
  return { from, to, window: { from: from.toISOString(), to: to.toISOString(), coveredMinutes, note } };
}

/** A timestamp parameter for the rollup's `timestamp(3)` (UTC, without zone) columns. */
const utc = (d: Date) => Prisma.sql`${d.toISOString()}::timestamp`;

/** The rollup columns a histogram reads, the same in the hour, day and week rollups. */
const ROLLUP_COLUMNS = Prisma.sql`"type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs"`;

/**
 * The rollup rows of a window, as one relation. The week and month views read the week rollup for
 * the whole ISO weeks between the window's first Monday and the Monday of `to`, and the day rollup
 * for the days before and after (a call recorded with a clock ahead stays out, as it does of the
 * day of `to` below): a month is about four week rows and a week's days a cell, not thirty days. The
 * shorter ranges count the same calls as the hour rows from `from` to `to` would, but read the UTC
 * days from the first midnight in the window on from the day rollup (the day of `to` among them: at
 * the current time nothing later is recorded yet, as the current hour's row already assumes) and
 * hour rows only for the hours before that midnight. A day row stands for up to 24 hour rows, so a
 * window reads fewer rows the busier its hours are.
 */
function rollupRows(range: LatencyRange, from: Date, to: Date): Prisma.Sql {
  const day = (d: Date) => Prisma.sql`${d.toISOString().slice(0, 10)}::date`;
  if (DAILY.has(range)) {
    const days = (a: Date, b: Prisma.Sql) =>
      Prisma.sql`SELECT ${ROLLUP_COLUMNS} FROM "ModelCallRollupDay" WHERE "day" >= ${day(a)} AND ${b}`;
    const first = firstMonday(from);
    const last = mondayOf(to);
    if (first >= last) return Prisma.sql`(${days(from, Prisma.sql`"day" <= ${day(to)}`)})`;
    return Prisma.sql`(
      ${days(from, Prisma.sql`"day" < ${day(first)}`)}
      UNION ALL
      SELECT ${ROLLUP_COLUMNS} FROM "ModelCallRollupWeek" WHERE "week" >= ${day(first)} AND "week" < ${day(last)}
      UNION ALL
      ${days(last, Prisma.sql`"day" <= ${day(to)}`)})`;
  }
  const firstMidnight = new Date(floorDay(from.getTime() - 1) + 86_400_000);
  if (firstMidnight > to)
    return Prisma.sql`(SELECT ${ROLLUP_COLUMNS} FROM "ModelCallRollup" WHERE "hour" >= ${utc(from)} AND "hour" <= ${utc(to)})`;
  return Prisma.sql`(
    SELECT ${ROLLUP_COLUMNS} FROM "ModelCallRollup" WHERE "hour" >= ${utc(from)} AND "hour" < ${utc(firstMidnight)}
    UNION ALL
    SELECT ${ROLLUP_COLUMNS} FROM "ModelCallRollupDay" WHERE "day" >= ${day(firstMidnight)} AND "day" <= ${day(to)})`;
}

/**
 * The rollup rows that count the calls of `[the hour of since, until)`, as one relation with the
 * hour rollup's columns (`ROLLUP_COLUMNS`): hour rows for the part-days at either end, day rows for
 * the whole UTC days between. It counts exactly what the hour rollup alone would, in at most 48
 * hour rows and one day row a day per cell, so a week's window reads about a fifth of the rows
 * whatever the call volume (the import start's projection and the budgets' p99 read it).
 */
export function rollupSpan(since: Date, until: Date): Prisma.Sql {
  const start = floorHour(since.getTime());
  const firstMidnight = floorDay(start - 1) + 86_400_000;
  const lastMidnight = floorDay(until.getTime());
  const hours = (from: number, to: Date | number) =>
    Prisma.sql`SELECT ${ROLLUP_COLUMNS} FROM "ModelCallRollup" WHERE "hour" >= ${utc(new Date(from))} AND "hour" < ${utc(new Date(to))}`;
  if (firstMidnight >= lastMidnight) return Prisma.sql`(${hours(start, until)})`;
  const day = (ms: number) => Prisma.sql`${new Date(ms).toISOString().slice(0, 10)}::date`;
  return Prisma.sql`(
    ${hours(start, firstMidnight)}
    UNION ALL
    SELECT ${ROLLUP_COLUMNS} FROM "ModelCallRollupDay" WHERE "day" >= ${day(firstMidnight)} AND "day" < ${day(lastMidnight)}
    UNION ALL
    ${hours(lastMidnight, until)})`;
}

/** A row of the histogram query: a cell (`is_option` false) or a filter option (true). */
interface GroupRow {
  type: string;
  is_option: boolean;
  /** Cells: whether the row is within the queue and kind filters. */
  in_scope: boolean | null;
  /** Cells: whether it also matches the selected type and model. */
  selected: boolean | null;
  bucket: number | null;
  outcome: string | null;
  /** Options: the queue, kind and model seen ('' for calls outside a job). */
  queue: string | null;
  kind: string | null;
  model: string | null;
  n: number;
  sum_ms: number;
  max_ms: number;
}

/**
 * The latency histogram of one call type over a range, with percentiles, outcome counts, the
 * tool calls beside it and the filter options, in one query on the rollup table.
 *
 * @param now - the end of the window. @defaultValue the current time
 */
export async function getLatencyHistogram(
  query: LatencyHistogramQuery,
  now: Date = new Date(),
): Promise<LatencyHistogram> {
  const q = latencyHistogramQuerySchema.parse(query);
  const { from, to, window } = latencyWindow(q.range, now);

  const scope: Prisma.Sql[] = [Prisma.sql`TRUE`];
  if (q.queue) scope.push(Prisma.sql`r."queue" = ${q.queue}`);
  if (q.kind) scope.push(Prisma.sql`r."jobKind" = ${q.kind}`);
  const inScope = Prisma.join(scope, " AND ");
  const selected = q.model
    ? Prisma.sql`(${inScope} AND r."type" = ${q.type}::"CallType" AND r."model" = ${q.model})`
    : Prisma.sql`(${inScope} AND r."type" = ${q.type}::"CallType")`;

  // One pass over the window's rollup rows, two groupings (GROUPING SETS):
  // - per type × bucket × outcome, split by whether the row matches the filters (cells for the
  //   chart and the summaries; the columns 3 and 4 are the two flags);
  // - per type × queue × kind × model, unfiltered (the filter menus).
  const rows = await db().$queryRaw<GroupRow[]>`
    SELECT r."type"::text AS type,
           GROUPING(r."queue", r."jobKind", r."model") = 0 AS is_option,
           ${inScope} AS in_scope,
           ${selected} AS selected,
           r."bucket" AS bucket, r."outcome"::text AS outcome,
           r."queue" AS queue, r."jobKind" AS kind, r."model" AS model,
           SUM(r."count")::float8 AS n, SUM(r."sumMs")::float8 AS sum_ms, MAX(r."maxMs") AS max_ms
    FROM ${rollupRows(q.range, from, to)} r
    GROUP BY GROUPING SETS ((r."type", 3, 4, r."bucket", r."outcome"), (r."type", r."queue", r."jobKind", r."model"))`;

  const toCell = (r: GroupRow): BucketCell => ({
    bucket: Number(r.bucket),
    outcome: r.outcome as CallOutcome,
    count: Number(r.n),
    sumMs: Number(r.sum_ms),
    maxMs: Number(r.max_ms),
  });
  const cells = rows.filter((r) => !r.is_option);
  const selectedCells = cells.filter((r) => r.selected).map(toCell);
  // Every tool cell within the queue and kind filters, whether or not it matched the model filter.
  const toolCells = cells.filter((r) => r.type === "tool" && r.in_scope).map(toCell);
  const options = rows.filter((r) => r.is_option);
  const distinct = (values: (string | null)[]) =>
    [...new Set(values.filter((v): v is string => !!v))].sort((a, b) => a.localeCompare(b));

  const buckets: LatencyBucketRow[] = Array.from({ length: BUCKET_COUNT }, (_, b) => ({
    bucket: b,
    lowerMs: Math.round(bucketLowerMs(b)),
    upperMs: Number.isFinite(bucketUpperMs(b)) ? Math.round(bucketUpperMs(b)) : null,
    count: 0,
    byOutcome: Object.fromEntries(CALL_OUTCOMES.map((o) => [o, 0])) as Record<CallOutcome, number>,
  }));
  for (const c of selectedCells) {
    const row = buckets[c.bucket]!;
    row.count += c.count;
    row.byOutcome[c.outcome] += c.count;
  }

  return {
    range: q.range,
    type: q.type,
    filters: { queue: q.queue ?? null, kind: q.kind ?? null, model: q.model ?? null },
    window,
    buckets,
    summary: summarizeCells(selectedCells),
    tools: summarizeCells(toolCells),
    options: {
      queues: distinct(options.map((r) => r.queue)),
      kinds: distinct(options.map((r) => r.kind)),
      models: distinct(options.filter((r) => r.type === q.type).map((r) => r.model)),
    },
  };
}

/** Whose calls a p99 is taken over: a job kind's, on one queue or on any. */
export interface P99Scope {
  kind: string;
  /** @defaultValue any queue, calls recorded outside a queue included */
  queue?: string;
}

/** The bucket holding a scope's 99th-percentile call of one type. */
export interface P99Bucket<S extends P99Scope = P99Scope> {
  scope: S;
  type: CallType;
  /** The latency bucket that holds the 99th-percentile call. */
  bucket: number;
  /** The slowest call recorded in that bucket (recorded ms, as measured: not time-scaled). */
  maxMs: number;
  /** Calls of that type in the scope and window. */
  calls: number;
  /** Their mean duration (recorded ms, as measured: not time-scaled). */
  meanMs: number;
  /** Calls in the buckets below, and in this one: where the 99th percentile call sits in it. */
  below: number;
  inBucket: number;
}

/**
 * For each scope and call type, the latency bucket holding the 99th-percentile call over
 * `[since, until)`, from the call rollups (`rollupSpan`), with the slowest call in that bucket and the number of
 * calls — aggregated in PostgreSQL, one row per scope × type that had calls. The job splitter sizes
 * parts from it and the budgets page judges risk from it, so both read the same p99.
 *
 * @param types - the call types to read. @defaultValue every type
 */
export async function listP99Buckets<S extends P99Scope>(
  scopes: readonly S[],
  window: { since: Date; until: Date },
  types: readonly CallType[] = CALL_TYPES,
): Promise<P99Bucket<S>[]> {
  if (scopes.length === 0) return [];
  const kinds = scopes.map((s) => s.kind);
  const queues = scopes.map((s) => s.queue ?? "");
  const anyQueue = scopes.map((s) => s.queue === undefined);
  const rows = await db().$queryRaw<(Omit<P99Bucket, "scope"> & { scope: number })[]>`
    WITH per_bucket AS (
      SELECT t.i, r.type, r.bucket, sum(r.count)::float8 AS n, sum(r."sumMs")::float8 AS sum_ms, max(r."maxMs") AS max_ms
      FROM unnest(${kinds}::text[], ${queues}::text[], ${anyQueue}::boolean[]) WITH ORDINALITY AS t(kind, queue, any_queue, i)
      JOIN ${rollupSpan(window.since, window.until)} r
        ON r."jobKind" = t.kind AND (t.any_queue OR r.queue = t.queue)
      WHERE r.type::text = ANY(${[...types]}::text[])
      GROUP BY t.i, r.type, r.bucket
    ), cumulative AS (
      SELECT i, type, bucket, max_ms, n,
             sum(n) OVER (PARTITION BY i, type ORDER BY bucket) AS cum,
             sum(n) OVER (PARTITION BY i, type) AS total,
             sum(sum_ms) OVER (PARTITION BY i, type) AS total_ms
      FROM per_bucket
    )
    SELECT DISTINCT ON (i, type) (i - 1)::int AS scope, type::text AS type, bucket, max_ms AS "maxMs", total AS calls,
           total_ms / total AS "meanMs", cum - n AS below, n AS "inBucket"
    FROM cumulative
    WHERE cum >= 0.99 * total
    ORDER BY i, type, bucket`;
  return rows.map((r) => ({ ...r, scope: scopes[r.scope]! }));
}

/**
 * The list query of the calls one bar of a histogram counts: its type and filters, its window and
 * its bucket. Null for whole items, which are counted but not kept one by one.
 */
export function bucketCallsQuery(
  h: Pick<LatencyHistogram, "type" | "filters" | "window">,
  bucket: number,
): Record<string, string> | null {
  if (h.type === "item") return null;
  return {
    type: h.type,
    ...(h.filters.queue ? { queue: h.filters.queue } : {}),
    ...(h.filters.kind ? { kind: h.filters.kind } : {}),
    ...(h.filters.model ? { model: h.filters.model } : {}),
    from: h.window.from,
    to: h.window.to,
    bucket: String(bucket),
  };
}

/** The filters of one list of calls: `/model-calls/calls`, what a histogram bar or a job's timeline links to. */
export const callListQuerySchema = z
  .object({
    /** Calls of one type; any type (model, OCR and tool calls) when absent. */
    type: z.enum(CALL_TYPES).optional(),
    queue: filterValue,
    kind: filterValue,
    model: filterValue,
    /** A job's calls, and those of its parts when it was split. */
    job: z.uuid().optional(),
    /** The latency bucket of the histogram (lib/modelcalls/buckets.ts): the calls counted in that bar. */
    bucket: z.coerce.number().int().min(0).max(LAST_BUCKET).optional(),
    /** Calls started from (inclusive) … to (inclusive): the histogram's window. */
    from: z.iso.datetime({ offset: true }).optional(),
    to: z.iso.datetime({ offset: true }).optional(),
    /** Keyset pagination: the id of the last call of the previous page. */
    after: z
      .string()
      .regex(/^[1-9][0-9]{0,18}$/, "a call id")
      .optional(),
    limit: z.coerce.number().int().min(1).max(200).default(50),
  })
  .refine((q) => !q.from || !q.to || Date.parse(q.from) <= Date.parse(q.to), {
    message: "from must not be after to",
    path: ["from"],
  });
export type CallListQuery = z.input<typeof callListQuerySchema>;

export interface CallRow {
  id: string;
  startedAt: string;
  type: string;
  model: string;
  queue: string | null;
  kind: string | null;
  jobId: string | null;
  durationMs: number;
  outcome: CallOutcome;
  error: string | null;
  batchSize: number;
}

export interface CallList {
  calls: CallRow[];
  /** Every call that matches, over all pages: for a bucket, the height of its bar. */
  total: number;
  nextAfter: string | null;
  /** The bucket's edges in ms, rounded, when a bucket was asked for: `[lowerMs, upperMs)`, upper null for the last. */
  bucket: { bucket: number; lowerMs: number; upperMs: number | null } | null;
}

/** Calls of these types are rows; whole items exist only as rollup counts. */
const CALL_ROW_TYPES = [...CALL_TYPES];

/** A list query as parsed: defaults filled in. */
type ParsedCallListQuery = z.output<typeof callListQuerySchema>;

/** What a list query matches over all pages: its type, filters, job (with its parts), bucket and window. */
function callsWhere(q: ParsedCallListQuery, parts: { id: string }[]): Prisma.ModelCallWhereInput {
  // Bucket 0 has no lower edge and the last no upper one, as in `bounded_latency_bucket`.
  const duration =
    q.bucket === undefined
      ? undefined
      : {
          ...(q.bucket > 0 ? { gte: bucketFirstMs(q.bucket) } : {}),
          ...(q.bucket < LAST_BUCKET ? { lt: bucketFirstMs(q.bucket + 1) } : {}),
        };
  return {
    type: q.type ?? { in: CALL_ROW_TYPES },
    ...(q.queue ? { queue: q.queue } : {}),
    ...(q.kind ? { jobKind: q.kind } : {}),
    ...(q.model ? { model: q.model } : {}),
    ...(q.job ? { jobId: { in: [q.job, ...parts.map((p) => p.id)] } } : {}),
    ...(duration ? { durationMs: duration } : {}),
    ...(q.from || q.to
      ? { startedAt: { ...(q.from ? { gte: new Date(q.from) } : {}), ...(q.to ? { lte: new Date(q.to) } : {}) } }
      : {}),
  };
}

/** The page after the cursor call (newest first), or the first page when there is none. */
function afterCursor(
  where: Prisma.ModelCallWhereInput,
  cursor: { startedAt: Date } | undefined,
  after: string | undefined,
): Prisma.ModelCallWhereInput {
  // Written as `startedAt <= c AND (startedAt < c OR id < i)` so the first half bounds the index range (see listJobs).
  return cursor && after
    ? {
        AND: [
          where,
          { startedAt: { lte: cursor.startedAt } },
          { OR: [{ startedAt: { lt: cursor.startedAt } }, { id: { lt: BigInt(after) } }] },
        ],
      }
    : where;
}

/** The columns a list row shows. */
const CALL_ROW_SELECT = {
  id: true,
  startedAt: true,
  type: true,
  model: true,
  queue: true,
  jobKind: true,
  jobId: true,
  durationMs: true,
  outcome: true,
  error: true,
  batchSize: true,
} satisfies Prisma.ModelCallSelect;

/** One call as a list row. */
function callRowOf(r: Prisma.ModelCallGetPayload<{ select: typeof CALL_ROW_SELECT }>): CallRow {
  return {
    id: r.id.toString(),
    startedAt: r.startedAt.toISOString(),
    type: r.type,
    model: r.model,
    queue: r.queue,
    kind: r.jobKind,
    jobId: r.jobId,
    durationMs: r.durationMs,
    outcome: r.outcome,
    error: r.error,
    batchSize: r.batchSize,
  };
}

/**
 * The calls that match a list query, newest first, a keyset page at a time, and how many match in
 * all. A bucket is the same whole-millisecond range the rollup trigger counts it by
 * (`bounded_latency_bucket`, `bucketFirstMs`), and the window the one the histogram read, so a
 * bar's list holds exactly the calls the bar counts (plus any that were still running when the
 * histogram was read). A job's list takes in its parts'.
 */
export async function listCalls(query: CallListQuery): Promise<CallList> {
  const q = callListQuerySchema.parse(query);
  const [parts, cursor] = await Promise.all([
    q.job ? db().job.findMany({ where: { parentId: q.job }, select: { id: true } }) : Promise.resolve([]),
    q.after
      ? db().modelCall.findUnique({ where: { id: BigInt(q.after) }, select: { startedAt: true } })
      : Promise.resolve(undefined),
  ]);
  if (cursor === null) return { calls: [], total: 0, nextAfter: null, bucket: null };
  const where = callsWhere(q, parts);
  const [rows, total] = await Promise.all([
    db().modelCall.findMany({
      where: afterCursor(where, cursor, q.after),
      orderBy: [{ startedAt: "desc" }, { id: "desc" }],
      take: q.limit + 1,
      select: CALL_ROW_SELECT,
    }),
    db().modelCall.count({ where }),
  ]);
  const shown = rows.slice(0, q.limit);
  return {
    calls: shown.map(callRowOf),
    total,
    nextAfter: rows.length > q.limit ? (shown.at(-1)?.id.toString() ?? null) : null,
    bucket:
      q.bucket === undefined
        ? null
        : // Labelled as the histogram labels the bar (its rounded edges); the filter above is exact.
          {
            bucket: q.bucket,
            lowerMs: Math.round(bucketLowerMs(q.bucket)),
            upperMs: q.bucket < LAST_BUCKET ? Math.round(bucketUpperMs(q.bucket)) : null,
          },
  };
}
