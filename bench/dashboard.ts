/**
 * `npm run bench:dashboard` (`npx tsx bench/dashboard.ts [--jobs N] [--calls N] [--passes N] [--keep]`):
 * how the dashboard's reads and an import's start scale with history — the latency histogram
 * behind /model-calls, the job list behind /jobs, the stuck jobs behind /stuck (and the
 * overview), and the projection every import's start reads — at 100× the rows.
 *
 * Two databases of its own, created with the project's migrations and dropped at the end
 * (`--keep` leaves them for EXPLAIN): `bounded_bench_small` with 100,000 model calls and 10,000
 * jobs (`--calls`, `--jobs`), `bounded_bench_large` with 100 × both: 10,000,000 calls and
 * 1,000,000 jobs. (A year of a busy deployment's calls, 100,000,000, takes this machine's disk
 * and hours to load; `--calls 1000000` asks for it.) Both are loaded by the same
 * set-based INSERT … SELECT generate_series statements from the same seed:
 * - model calls spread over 30 days — model calls from production's latency distribution (the
 *   simulator's sampler: lognormal, median 5.5 s, p99 35 s, a rare tail to 11 min) and the fast
 *   tool calls made in the same runs. The small size's go through the rollup trigger as
 *   production records them; the large size's are inserted without it and counted into the
 *   rollups by one GROUP BY a table (100 × the calls through the trigger take most of an hour),
 *   which the small size first proves gives exactly the trigger's rows;
 * - jobs over 300 tenants (a few large, many small) and every queue and kind of the catalog, with
 *   the catalog's budgets: a history of terminal jobs spread over 180 days (mostly completed,
 *   a few percent timed out, failed, stopped, abandoned, cancelled; every 200th was split into
 *   three parts; each ending that waited on a person was marked handled 40 min after it ended, as
 *   on-call answers the alert), 12 ended jobs that wait on a person now, and the work in flight now — 325 non-terminal rows: queued, running, delayed
 *   for a rate-limit window, split jobs running through their parts — of which 57 are stuck by
 *   the stuck query's definition (queued past the soft budget, silent, or running past it).
 *   The work in flight and the jobs waiting on a person are the same in both: they are bounded by
 *   worker slots, backlog and on-call, not by how much history the table holds; what grows 100×
 *   is the history.
 *
 * Each database is read by a process of its own (this file with `--child`, DATABASE_URL pointing
 * at it), as the web would read it. The two take turns query round by query round — first the
 * warm-up (5 rounds each: connection pools, plans, caches), then 21 timed rounds each, the order
 * alternating — so a burst of load on a shared machine slows both sizes alike instead of landing
 * on one of them; each figure is the median of its 21 runs. `--passes N` times N such sets over
 * the same loaded databases and reports each with its own RESULT line (loading the large size
 * takes most of a run). A round times, one after the other:
 * - `getLatencyHistogram` for every range (reads the hour and day rollups);
 * - `listJobs` as /jobs calls it: the default page, the 10th page ("Older jobs →" nine times), the
 *   page after the job halfway down the list (5,000 jobs deep, then 500,000: a cursor that skips the
 *   newer rows one by one shows here), and the first page filtered by status (timed out), by kind,
 *   by tenant and by tenant search;
 * - `listStuckJobs()` as /stuck calls it (the query, then BullMQ's state of each row), and
 *   `countStuckByKind()` (the `bounded_jobs_stuck` gauge: the query alone), `listAwaitingOperator()`
 *   (the page's first group and the `bounded_jobs_awaiting_operator` gauge), and every read of the
 *   /stuck page together;
 * - `countJobsByStatus()` (the overview's counts: open jobs, and jobs finished in the last 24 h);
 * - `projectItems("csv_import", 2000)` read afresh, as an import's start projects itself.
 * The in-flight rows' timestamps are moved to "now" just before timing, so both sizes see the
 * same stuck set. Redis keys go under a prefix of the bench's own
 * (`<BOUNDED_REDIS_PREFIX>-bench-dashboard-<pid>`; a hash tag on a Redis Cluster), removed at the end.
 *
 * Prints a table per size, then small ms, large ms and the ratio per query (target ≤ 2), and ends
 * with one line a pass: `RESULT bench=dashboard pass=… passes=… load1=… calls_small=… calls_large=… jobs_small=… jobs_large=…
 * awaiting_rows=… histogram_30d_ratio=… jobs_list_ratio=… stuck_ratio=… max_ratio=… <query>_ms_small=…
 * <query>_ms_large=… <query>_ratio=… …` (ratio_30d and ratio_24h as before).
 */
import { fork, type ChildProcess } from "node:child_process";
import os from "node:os";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { z } from "zod";
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import { dropDatabase, migrate } from "../scripts/db/migrate";
import { benchDatabaseUrl, benchRedisPrefix, flagNumber, withinCap } from "./common";

/** How many times the large database holds the small one's rows. */
const GROWTH = 100;
/** The small database's jobs and model calls (`--jobs`, `--calls`); the large one holds GROWTH × both. */
const SMALL = { jobs: flagNumber("--jobs") ?? 10_000, calls: flagNumber("--calls") ?? 100_000 };
const SIZES = {
  small: { calls: SMALL.calls, jobs: SMALL.jobs, database: "bounded_bench_small" },
  large: { calls: SMALL.calls * GROWTH, jobs: SMALL.jobs * GROWTH, database: "bounded_bench_large" },
} as const;
/** Timed passes over the same loaded databases (`--passes`), each of TIMED_RUNS rounds and reported on its own. */
const PASSES = flagNumber("--passes") ?? 1;
type Size = keyof typeof SIZES;
const SIZE_NAMES = Object.keys(SIZES) as Size[];
/** Calls per INSERT statement (at the small size each row also runs the rollup trigger). */
const BATCH = 165_000;
/** History jobs per INSERT statement. */
const JOB_BATCH = 50_000;
const WARMUP_RUNS = 5;
const TIMED_RUNS = 21;
/** Share of tool calls among the recorded calls (deterministic tools inside agent runs). */
const TOOL_SHARE = 0.2;
const RANGES = ["1h", "24h", "7d", "30d"] as const;
const TENANTS = 300;
/** Every SPLIT_EVERY-th job of the history was split into SPLIT_PARTS parts. */
const SPLIT_EVERY = 200;
const SPLIT_PARTS = 3;
/** Days of job history. */
const HISTORY_DAYS = 180;
/** Ratio large/small a query held to the target may reach. */
const TARGET = 2;
/**
 * Real ms a reader may take to answer (ready, or one round of every query) before the bench gives
 * up: a round takes well under a second at either size, so only a hung reader reaches it.
 */
const REPLY_CAP_MS = 120_000;

/**
 * The job mix: who runs what, in what share of the history, with what batch size (items of a
 * job: rows, documents, steps, invoices, pages, cards).
 */
const MIX = [
  { queue: "imports", kind: "csv_import", share: 0.3, maxItems: 2_000 },
  { queue: "documents", kind: "bulk_ocr", share: 0.12, maxItems: 95 },
  { queue: "agent-batch", kind: "agent_run", share: 0.13, maxItems: 40 },
  { queue: "agent-interactive", kind: "agent_run", share: 0.2, maxItems: 12 },
  { queue: "sweeps", kind: "overdue_invoices", share: 0.03, maxItems: 5_000 },
  { queue: "marketplace-sync", kind: "marketplace_sync", share: 0.15, maxItems: 300 },
  { queue: "generations", kind: "card_generation", share: 0.07, maxItems: 1 },
] as const;
/** How the history ended. */
const ENDINGS = [
  { status: "completed", share: 0.85 },
  { status: "completed_with_errors", share: 0.07 },
  { status: "timed_out", share: 0.03 },
  { status: "failed", share: 0.02 },
  { status: "killed", share: 0.01 },
  { status: "abandoned", share: 0.01 },
  { status: "cancelled", share: 0.01 },
] as const;

/**
 * The work in flight (same in both databases). Counts per category; "stuck" ones are stuck by
 * the stuck query's definition, the others are not (a delayed job waits for a rate-limit window).
 */
const IN_FLIGHT = [
  { cat: "queued", n: 90 },
  { cat: "queued_stuck", n: 30 },
  { cat: "running", n: 80 },
  { cat: "running_silent", n: 15 },
  { cat: "running_over_budget", n: 10 },
  { cat: "delayed", n: 55 },
  { cat: "delayed_overdue", n: 5 },
] as const;
/** Split jobs running through their parts now: 4 parts each, the last one silent for the first two. */
const SPLITS_IN_FLIGHT = 8;
const STUCK_EXPECTED = 30 + 15 + 10 + 2;
/** Ended jobs waiting on a person now (same in both; the history's were handled). */
const AWAITING = 12;

// The bench databases sit beside the configured one (same server and user).
const urlOf = (size: Size) => benchDatabaseUrl(SIZES[size].database);
const keep = process.argv.includes("--keep");

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

const fmt = (ms: number) => ms.toFixed(2);
const int = (n: number) => n.toLocaleString("en-US");
/** Cumulative shares without the final 1: `1 + width_bucket(random(), edges)` picks an index. */
const edges = (shares: readonly number[]) =>
  shares.slice(0, -1).map((_, i) => shares.slice(0, i + 1).reduce((a, b) => a + b, 0));

/**
 * A deterministic id from a SQL text expression: its md5 with the version and variant bits of a
 * random (v4) UUID, so ids pass the same validation as real ones (`z.uuid()` in the job filter).
 */
const uuid = (expr: string) => `overlay(overlay(md5(${expr}) placing '4' from 13) placing '8' from 17)::uuid`;

/** History rows `n` such that they plus their split parts plus the work in flight make `jobs`. */
function historyFor(jobs: number, inFlight: number): number {
  let n = jobs - inFlight;
  while (n + SPLIT_PARTS * Math.floor(n / SPLIT_EVERY) > jobs - inFlight) n--;
  return n;
}

// ─── Loading (the parent process) ────────────────────────────────────────────────────────────

/** The model-call latency mixture (the simulator's). */
interface Latency {
  medianMs: number;
  sigma: number;
  tailShare: number;
  tailFromMs: number;
  maxMs: number;
}

/** The job mix as SQL arrays, indexed 1… by `1 + width_bucket(random(), edges)`. */
interface Mix {
  edges: number[];
  queues: string[];
  kinds: string[];
  soft: number[];
  hard: number[];
  sources: string[];
  maxItems: number[];
  syncIndex: number;
  importIndex: number;
  /** The words of a job that failed on an internal error (lib/diagnosis/resume-policy.ts). */
  internalError: string;
}

/**
 * `n` calls with `startedAt` uniformly over the last 30 days. Model calls: the simulator's
 * mixture (lognormal body by Box–Muller, rare uniform tail), ~1 % errors and ~0.3 % aborted by a
 * deadline; tool calls: lognormal around 30 ms. Queues and kinds as the catalog runs them.
 */
async function insertCalls(client: pg.Client, n: number, latency: Latency): Promise<void> {
  const { medianMs, sigma, tailShare, tailFromMs, maxMs } = latency;
  await client.query(
    `INSERT INTO "ModelCall" ("queue", "jobKind", "model", "type", "startedAt", "durationMs", "outcome")
     SELECT (ARRAY['imports', 'documents', 'agent-batch', 'agent-interactive'])[src],
            (ARRAY['csv_import', 'bulk_ocr', 'agent_run', 'agent_run'])[src],
            CASE WHEN tool THEN (ARRAY['lookup_invoice', 'search_transactions'])[1 + floor(u_name * 2)::int] ELSE 'bounded-sim-1' END,
            (CASE WHEN tool THEN 'tool' ELSE 'model' END)::"CallType",
            (now() AT TIME ZONE 'UTC') - u_at * interval '30 days',
            (CASE
               WHEN tool THEN round(30 * exp(0.5 * z))
               WHEN u_tail < $2::float8 THEN round($3::float8 + u_tail_at * ($4::float8 - $3::float8))
               ELSE round(least($4::float8, $5::float8 * exp($6::float8 * z)))
             END)::int,
            (CASE WHEN u_out < 0.01 THEN 'error' WHEN u_out < 0.013 THEN 'aborted' ELSE 'ok' END)::"ModelCallOutcome"
     FROM (
       SELECT 1 + floor(random() * 4)::int AS src, random() < $7::float8 AS tool, random() AS u_name, random() AS u_at,
              random() AS u_tail, random() AS u_tail_at, random() AS u_out,
              sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) AS z
       FROM generate_series(1, $1::int)
     ) s`,
    [n, tailShare, tailFromMs, maxMs, medianMs, sigma, TOOL_SHARE],
  );
}

/** Tenants `tenant-001` … (ids derived from the number, so jobs can name them without a lookup). */
async function insertTenants(client: pg.Client): Promise<void> {
  await client.query(
    `INSERT INTO "Tenant" (id, slug, "createdAt")
     SELECT ${uuid("'bench-tenant-' || t")}, 'tenant-' || lpad(t::text, 3, '0'), (now() AT TIME ZONE 'UTC') - interval '1 year'
     FROM generate_series(1, $1::int) t`,
    [TENANTS],
  );
}

/**
 * History jobs number `from + 1 … from + n`: terminal, created uniformly over HISTORY_DAYS,
 * tenants skewed (the tenant number is 300·u², so the first tenants hold most jobs), kinds and
 * endings by the shares above, budgets from the catalog. Then the split ones: every
 * SPLIT_EVERY-th job in the range gets SPLIT_PARTS completed parts (params.part, parentId) and
 * ends completed, as a settled split does.
 */
async function insertHistory(client: pg.Client, mix: Mix, from: number, n: number): Promise<void> {
  await client.query(
    `WITH s AS (
       SELECT k, 1 + width_bucket(random(), $3::float8[]) AS mi, 1 + floor($4::int * power(random(), 2))::int AS t,
              1 + width_bucket(random(), $5::float8[]) AS si,
              (now() AT TIME ZONE 'UTC') - random() * make_interval(days => $13::int) AS created,
              random() AS u1, random() AS u2, random() AS u3
       FROM generate_series($1::int + 1, $1::int + $2::int) AS k
     ), r AS (
       SELECT s.*, ($6::text[])[mi] AS kind, ($7::text[])[mi] AS queue, ($8::int[])[mi] AS soft, ($9::int[])[mi] AS hard,
              ($10::text[])[mi] AS src, ($11::text[])[si] AS st, 1 + floor(u1 * ($12::int[])[mi])::int AS total
       FROM s
     ), v AS (
       SELECT r.*,
              CASE WHEN st IN ('completed', 'completed_with_errors') THEN total WHEN st = 'cancelled' THEN 0 ELSE floor(u2 * total)::int END AS done,
              CASE WHEN st = 'completed' THEN 0 WHEN st = 'completed_with_errors' THEN 1 + floor(u3 * 0.05 * total)::int ELSE floor(u3 * 0.02 * total)::int END AS bad,
              CASE st WHEN 'timed_out' THEN soft WHEN 'killed' THEN hard WHEN 'cancelled' THEN 0 ELSE round(1000 + u2 * 0.4 * soft)::int END AS run_ms
       FROM r
     )
     INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs",
                        "budgetSource", "heartbeatAt", message, "progressToken", "createdAt", "updatedAt", "startedAt", "attemptStartedAt",
                        "finishedAt", params)
     SELECT ${uuid("'bench-job-' || k")}, kind, queue, ${uuid("'bench-tenant-' || t")}, st::"JobStatus", total,
            done - least(bad, done), least(bad, done), done, CASE WHEN st = 'cancelled' THEN 0 WHEN u3 < 0.05 THEN 2 ELSE 1 END,
            soft, hard, src,
            CASE WHEN st = 'cancelled' THEN NULL ELSE created + make_interval(secs => 2 + run_ms / 1000.0) END,
            CASE st
              WHEN 'completed' THEN NULL
              WHEN 'completed_with_errors' THEN 'Completed: ' || (done - least(bad, done)) || ' of ' || total || ' items applied, ' || least(bad, done) || ' failed (see the list).'
              WHEN 'timed_out' THEN 'Timed out after ' || done || ' of ' || total || ' items: the soft limit of ' || (soft / 60000) || ' min ran out. Split it or retry the remaining items.'
              WHEN 'killed' THEN 'Stopped at the hard limit of ' || (hard / 60000) || ' min after ' || done || ' of ' || total || ' items; the run did not end by itself.'
              WHEN 'failed' THEN 'Failed after ' || done || ' of ' || total || ' items: the outside service answered 500 three times in a row.'
              WHEN 'abandoned' THEN 'Abandoned after ' || done || ' of ' || total || ' items: the queue no longer runs it (queue state: unknown). Retry to continue from where it stopped.'
              ELSE 'Cancelled by an operator before it started.'
            END,
            md5('bench-token-' || k),
            created, created + make_interval(secs => 2 + run_ms / 1000.0),
            CASE WHEN st = 'cancelled' THEN NULL ELSE created + interval '2 seconds' END,
            CASE WHEN st = 'cancelled' THEN NULL ELSE created + interval '2 seconds' END,
            created + make_interval(secs => 2 + run_ms / 1000.0),
            CASE WHEN kind = 'marketplace_sync' THEN jsonb_build_object('family', (ARRAY['listings', 'orders', 'statistics'])[1 + k % 3]) END
     FROM v`,
    [
      from,
      n,
      mix.edges,
      TENANTS,
      edges(ENDINGS.map((e) => e.share)),
      mix.kinds,
      mix.queues,
      mix.soft,
      mix.hard,
      mix.sources,
      ENDINGS.map((e) => e.status),
      mix.maxItems,
      HISTORY_DAYS,
    ],
  );
  await client.query(
    `WITH p AS (
       SELECT j.* FROM generate_series($1::int + 1, $1::int + $2::int) AS k JOIN "Job" j ON j.id = ${uuid("'bench-job-' || k")}
       WHERE k % $3::int = 0
     ), parts AS (
       INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs",
                          "budgetSource", "heartbeatAt", message, "progressToken", "createdAt", "updatedAt", "startedAt", "attemptStartedAt",
                          "finishedAt", "parentId", params)
       SELECT ${uuid("'bench-part-' || p.id || '-' || i")}, p.kind, p.queue, p."tenantId", 'completed', size, size, 0, size, 1,
              p."budgetSoftMs", p."budgetHardMs", p."budgetSource", p."finishedAt" + i * interval '3 minutes', NULL,
              md5('bench-part-token-' || p.id || '-' || i), p."finishedAt" + interval '1 minute', p."finishedAt" + i * interval '3 minutes',
              p."finishedAt" + interval '1 minute', p."finishedAt" + interval '1 minute', p."finishedAt" + i * interval '3 minutes', p.id,
              jsonb_build_object('part', jsonb_build_object('of', p.id, 'index', i, 'count', $4::int, 'from', (i - 1) * size, 'to', i * size))
       FROM p, generate_series(1, $4::int) AS i, LATERAL (SELECT greatest(1, ceil(coalesce(p.total, 1)::float8 / $4::int)::int) AS size) z
       RETURNING "parentId"
     )
     UPDATE "Job" j SET status = 'completed', message = NULL, "finishedAt" = j."finishedAt" + $4::int * interval '3 minutes',
                        "updatedAt" = j."finishedAt" + $4::int * interval '3 minutes'
     WHERE j.id IN (SELECT "parentId" FROM parts)`,
    [from, n, SPLIT_EVERY, SPLIT_PARTS],
  );
}

/**
 * The work in flight, relative to now (production time: BOUNDED_TIME_SCALE 1). Returns the ids
 * of every row it wrote, whose timestamps `rebase` moves just before timing.
 * - queued: created within the last 15 s; queued_stuck: waiting past the soft budget by 10 min–2 h;
 * - running: heartbeat within 25 s, under 0.4 of the soft budget; running_silent: last heartbeat
 *   2–27 min ago; running_over_budget: heartbeating, started 1.1–1.6 soft budgets ago;
 * - delayed (syncs only): due back within 10 min, some created hours ago (not stuck however old);
 *   delayed_overdue: due back 10–20 min ago (flagged on /stuck, not stuck);
 * - split jobs: the parent `running` with an old heartbeat (its parts are the ones that can be
 *   stuck), split 8 min ago: parts 1 completed, 2 running, 3 queued, 4 queued (running and silent
 *   for two parents).
 */
async function insertInFlight(client: pg.Client, mix: Mix): Promise<string[]> {
  const { rows } = await client.query<{ id: string }>(
    `WITH cat AS (
       SELECT * FROM unnest($1::text[], $2::int[]) AS c(cat, n)
     ), s AS (
       SELECT cat, i, CASE WHEN cat LIKE 'delayed%' THEN $11::int ELSE 1 + width_bucket(random(), $3::float8[]) END AS mi,
              1 + floor($4::int * power(random(), 2))::int AS t, random() AS u1, random() AS u2, random() AS u3
       FROM cat, generate_series(1, cat.n) AS i
     ), r AS (
       SELECT s.*, ($5::text[])[mi] AS kind, ($6::text[])[mi] AS queue, ($7::int[])[mi] AS soft, ($8::int[])[mi] AS hard,
              ($9::text[])[mi] AS src, 1 + floor(u1 * ($10::int[])[mi])::int AS total, (now() AT TIME ZONE 'UTC') AS now_utc
       FROM s
     ), v AS (
       SELECT r.*,
              CASE cat
                WHEN 'running' THEN now_utc - u2 * 0.4 * make_interval(secs => soft / 1000.0)
                WHEN 'running_silent' THEN now_utc - interval '2 minutes' - u2 * interval '25 minutes' - u3 * 0.5 * make_interval(secs => soft / 1000.0)
                WHEN 'running_over_budget' THEN now_utc - (1.1 + 0.5 * u2) * make_interval(secs => soft / 1000.0)
              END AS attempt_at,
              CASE cat
                WHEN 'running' THEN now_utc - u3 * interval '25 seconds'
                WHEN 'running_silent' THEN now_utc - interval '2 minutes' - u2 * interval '25 minutes'
                WHEN 'running_over_budget' THEN now_utc - u3 * interval '25 seconds'
                WHEN 'delayed' THEN now_utc - u3 * interval '10 minutes'
                WHEN 'delayed_overdue' THEN now_utc - interval '20 minutes' - u3 * interval '10 minutes'
              END AS beat_at,
              CASE cat
                WHEN 'queued' THEN now_utc - u2 * interval '15 seconds'
                WHEN 'queued_stuck' THEN now_utc - make_interval(secs => soft / 1000.0) - interval '10 minutes' - u2 * interval '2 hours'
                WHEN 'delayed' THEN now_utc - interval '1 minute' - u2 * interval '5 hours'
                WHEN 'delayed_overdue' THEN now_utc - interval '30 minutes' - u2 * interval '5 hours'
              END AS created_at,
              CASE cat
                WHEN 'delayed' THEN now_utc + interval '5 seconds' + u1 * interval '10 minutes'
                WHEN 'delayed_overdue' THEN now_utc - interval '10 minutes' - u1 * interval '10 minutes'
              END AS wake_at
       FROM r
     ), w AS (
       SELECT v.*, coalesce(created_at, attempt_at - interval '5 seconds') AS created,
              CASE WHEN cat LIKE 'queued%' THEN 0 ELSE floor(u1 * total * 0.5)::int END AS done
       FROM v
     ), singles AS (
       INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs",
                          "budgetSource", "heartbeatAt", message, "progressToken", "createdAt", "updatedAt", "startedAt", "attemptStartedAt",
                          "wakeUpAt", reschedules, "queueJobId", params)
       SELECT ${uuid("'bench-live-' || cat || '-' || i")}, kind, queue, ${uuid("'bench-tenant-' || t")},
              split_part(cat, '_', 1)::"JobStatus", total, done, 0, done, CASE WHEN cat LIKE 'queued%' THEN 0 ELSE 1 END,
              soft, hard, src, beat_at,
              CASE WHEN cat LIKE 'delayed%' THEN 'Waiting for the marketplace''s rate limit (statistics:tenant-' || lpad(t::text, 3, '0') || ').' END,
              md5('bench-live-token-' || cat || '-' || i), created, coalesce(beat_at, created),
              CASE WHEN cat LIKE 'queued%' THEN NULL ELSE coalesce(attempt_at, created) END, attempt_at, wake_at,
              CASE WHEN cat LIKE 'delayed%' THEN 1 + floor(u3 * 5)::int ELSE 0 END,
              CASE WHEN kind = 'marketplace_sync' THEN 'sync:tenant-' || lpad(t::text, 3, '0') || ':' || (ARRAY['listings', 'orders', 'statistics'])[1 + i % 3] END,
              CASE WHEN kind = 'marketplace_sync' THEN jsonb_build_object('family', (ARRAY['listings', 'orders', 'statistics'])[1 + i % 3]) END
       FROM w
       RETURNING id
     ), parents AS (
       INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs",
                          "budgetSource", "heartbeatAt", message, "progressToken", "createdAt", "updatedAt", "startedAt", "attemptStartedAt")
       SELECT ${uuid("'bench-live-split-' || i")}, ($5::text[])[$12::int], ($6::text[])[$12::int], ${uuid("'bench-tenant-' || (1 + i)")},
              'running', 1600, 400, 3, 403, 2, ($7::int[])[$12::int], ($8::int[])[$12::int], ($9::text[])[$12::int],
              (now() AT TIME ZONE 'UTC') - interval '8 minutes', 'Split into 4 parts of 400 rows.', md5('bench-live-split-token-' || i),
              (now() AT TIME ZONE 'UTC') - interval '50 minutes', (now() AT TIME ZONE 'UTC') - interval '8 minutes',
              (now() AT TIME ZONE 'UTC') - interval '50 minutes', (now() AT TIME ZONE 'UTC') - interval '8 minutes'
       FROM generate_series(1, $13::int) AS i
       RETURNING id
     ), parts AS (
       INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs",
                          "budgetSource", "heartbeatAt", "progressToken", "createdAt", "updatedAt", "startedAt", "attemptStartedAt",
                          "finishedAt", "parentId", params)
       SELECT ${uuid("'bench-live-split-' || i || '-' || p")}, ($5::text[])[$12::int], ($6::text[])[$12::int], ${uuid("'bench-tenant-' || (1 + i)")},
              st::"JobStatus", 400, CASE st WHEN 'completed' THEN 400 WHEN 'running' THEN 150 ELSE 0 END, 0,
              CASE st WHEN 'completed' THEN 400 WHEN 'running' THEN 150 ELSE 0 END, CASE st WHEN 'queued' THEN 0 ELSE 1 END,
              ($7::int[])[$12::int], ($8::int[])[$12::int], ($9::text[])[$12::int],
              CASE WHEN st = 'queued' THEN NULL WHEN silent THEN now_utc - interval '5 minutes' ELSE now_utc - interval '10 seconds' END,
              md5('bench-live-split-token-' || i || '-' || p), now_utc - interval '8 minutes',
              CASE WHEN silent THEN now_utc - interval '5 minutes' ELSE now_utc - interval '10 seconds' END,
              CASE WHEN st = 'queued' THEN NULL ELSE now_utc - interval '8 minutes' END,
              CASE WHEN st = 'queued' THEN NULL ELSE now_utc - interval '7 minutes' END,
              CASE WHEN st = 'completed' THEN now_utc - interval '2 minutes' END,
              ${uuid("'bench-live-split-' || i")},
              jsonb_build_object('part', jsonb_build_object('of', ${uuid("'bench-live-split-' || i")}, 'index', p, 'count', 4, 'from', (p - 1) * 400, 'to', p * 400))
       FROM generate_series(1, $13::int) AS i, generate_series(1, 4) AS p,
            LATERAL (SELECT (now() AT TIME ZONE 'UTC') AS now_utc, p = 4 AND i <= 2 AS silent) z,
            LATERAL (SELECT CASE WHEN p = 1 THEN 'completed' WHEN p = 2 OR silent THEN 'running' ELSE 'queued' END AS st) y
       RETURNING id
     )
     SELECT id FROM singles UNION ALL SELECT id FROM parents UNION ALL SELECT id FROM parts`,
    [
      IN_FLIGHT.map((c) => c.cat),
      IN_FLIGHT.map((c) => c.n),
      mix.edges,
      TENANTS,
      mix.kinds,
      mix.queues,
      mix.soft,
      mix.hard,
      mix.sources,
      mix.maxItems,
      mix.syncIndex,
      mix.importIndex,
      SPLITS_IN_FLIGHT,
    ],
  );
  return rows.map((r) => r.id);
}

/**
 * History as on-call leaves it: every ending that waited on a person (an operator status) was
 * acted on within the hour — here, a `handled` timeline event 40 min after it ended (the trigger
 * keeps the job's `handledAt`). Jobs waiting on a person are few, whatever the history holds.
 */
async function handleHistory(client: pg.Client): Promise<void> {
  await client.query(
    `INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
     SELECT id, "finishedAt" + interval '40 minutes', 'handled', attempt, 'Marked handled by oncall: the customer was told.'
     FROM "Job" WHERE status IN ('timed_out', 'killed', 'failed', 'abandoned')`,
  );
}

/**
 * The jobs that wait on a person now (same in both databases, like the work in flight): AWAITING
 * ended jobs, one every 25 min over the last hours, each for a reason only a person resolves —
 * timed out on its budget, stopped at the hard limit, abandoned, failed on an internal error.
 * Returns their ids (`rebase` moves their clocks with the work in flight's).
 */
async function insertAwaiting(client: pg.Client, mix: Mix): Promise<string[]> {
  const { rows } = await client.query<{ id: string }>(
    `WITH s AS (
       SELECT i, (ARRAY['timed_out', 'killed', 'abandoned', 'failed'])[1 + i % 4] AS st, $2::int AS mi,
              (now() AT TIME ZONE 'UTC') - i * interval '25 minutes' AS ended
       FROM generate_series(1, $1::int) AS i
     )
     INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs",
                        "budgetSource", "heartbeatAt", message, "progressToken", "createdAt", "updatedAt", "startedAt", "attemptStartedAt", "finishedAt")
     SELECT ${uuid("'bench-awaiting-' || i")}, ($3::text[])[mi], ($4::text[])[mi], ${uuid("'bench-tenant-' || (1 + i * 7)")}, st::"JobStatus",
            1772, 340, 0, 340, 1, ($5::int[])[mi], ($6::int[])[mi], ($7::text[])[mi], ended,
            CASE st
              WHEN 'timed_out' THEN 'Timed out after 340 of 1772 items: the soft limit of ' || (($5::int[])[mi] / 60000) || ' min ran out. Split it or retry the remaining items.'
              WHEN 'killed' THEN 'Stopped at the hard limit of ' || (($6::int[])[mi] / 60000) || ' min after 340 of 1772 items; the run did not end by itself.'
              WHEN 'abandoned' THEN 'Abandoned after 340 of 1772 items: the queue no longer runs it (queue state: unknown). Retry to continue from where it stopped.'
              ELSE $8::text
            END,
            md5('bench-awaiting-token-' || i), ended - interval '20 minutes', ended, ended - interval '19 minutes', ended - interval '19 minutes', ended
     FROM s
     RETURNING id`,
    [AWAITING, mix.importIndex, mix.kinds, mix.queues, mix.soft, mix.hard, mix.sources, mix.internalError],
  );
  return rows.map((r) => r.id);
}

async function countRows(client: pg.Client) {
  const { rows } = await client.query<{
    calls: string;
    rollups: string;
    counted: string;
    jobs: string;
    open: string;
    rollup_size: string;
    job_size: string;
  }>(
    `SELECT (SELECT count(*) FROM "ModelCall") AS calls, (SELECT count(*) FROM "ModelCallRollup") AS rollups,
            (SELECT coalesce(sum("count"), 0) FROM "ModelCallRollup") AS counted, (SELECT count(*) FROM "Job") AS jobs,
            (SELECT count(*) FROM "Job" WHERE status IN ('queued', 'running', 'delayed')) AS open,
            pg_size_pretty(pg_relation_size('"ModelCallRollup"')) AS rollup_size, pg_size_pretty(pg_total_relation_size('"Job"')) AS job_size`,
  );
  const r = rows[0]!;
  return {
    calls: Number(r.calls),
    rollups: Number(r.rollups),
    counted: Number(r.counted),
    jobs: Number(r.jobs),
    open: Number(r.open),
    rollupSize: r.rollup_size,
    jobSize: r.job_size,
  };
}

interface Loaded {
  size: Size;
  client: pg.Client;
  inFlightIds: string[];
  /** When the in-flight rows' clocks were last set (the database's now, ms). */
  inFlightAt: number;
  rows: Awaited<ReturnType<typeof countRows>>;
  /** Real seconds the model calls took to insert and count into the rollups. */
  callsLoadS: number;
}

/** The trigger that counts each recorded call into the rollups (prisma/migrations, `bounded_model_call_rollup`). */
const ROLLUP_TRIGGER = "model_call_rollup";

/**
 * What `bounded_model_call_rollup` adds up one call at a time, as one statement a table over every
 * call in "ModelCall": the same keys (hour, UTC day, ISO week; "" for a null queue or kind), the same
 * bucket function, the same sums — the KindFiguresDay row under the trigger's own condition.
 */
const ROLLUP_BUILDS = (() => {
  const cell = `"type", coalesce("queue", ''), coalesce("jobKind", ''), "model", "outcome", bounded_latency_bucket("durationMs")`;
  const sums = `count(*)::int, sum("durationMs")::bigint, max("durationMs")::int`;
  const columns = `"type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs"`;
  return [
    {
      table: "ModelCallRollup",
      columns: `"hour", ${columns}`,
      select: `SELECT date_trunc('hour', "startedAt"), ${cell}, ${sums} FROM "ModelCall" GROUP BY 1, 2, 3, 4, 5, 6, 7`,
    },
    {
      table: "ModelCallRollupDay",
      columns: `"day", ${columns}`,
      select: `SELECT "startedAt"::date, ${cell}, ${sums} FROM "ModelCall" GROUP BY 1, 2, 3, 4, 5, 6, 7`,
    },
    {
      table: "ModelCallRollupWeek",
      columns: `"week", ${columns}`,
      select: `SELECT date_trunc('week', "startedAt")::date, ${cell}, ${sums} FROM "ModelCall" GROUP BY 1, 2, 3, 4, 5, 6, 7`,
    },
    {
      table: "KindFiguresDay",
      columns: `"day", "jobKind", "tokens", "tokenItems"`,
      select: `SELECT "startedAt"::date, "jobKind", sum("promptTokens" + coalesce("completionTokens", 0))::bigint, sum("batchSize")::bigint
               FROM "ModelCall" WHERE "type" = 'model' AND "outcome" = 'ok' AND "promptTokens" IS NOT NULL AND "jobKind" IS NOT NULL
               GROUP BY 1, 2`,
    },
  ];
})();

/** Throws unless each set-based build gives exactly the rows the trigger wrote (a database whose calls all went through it). */
async function checkRollupBuilds(client: pg.Client): Promise<void> {
  for (const b of ROLLUP_BUILDS) {
    const { rows } = await client.query<{ n: string }>(
      `SELECT count(*) AS n FROM (
         ((SELECT ${b.columns} FROM "${b.table}") EXCEPT ALL (${b.select}))
         UNION ALL
         ((${b.select}) EXCEPT ALL (SELECT ${b.columns} FROM "${b.table}"))) d`,
    );
    if (Number(rows[0]!.n) !== 0)
      throw new Error(`the set-based build of ${b.table} differs from the trigger's rows in ${rows[0]!.n} rows`);
  }
}

/** A year of a busy deployment's model calls: what the large size would hold if this machine allowed. */
const YEAR_OF_CALLS = 100_000_000;

const dbNow = async (client: pg.Client) =>
  (await client.query<{ now: Date }>("SELECT now() AS now")).rows[0]!.now.getTime();

/** One database: migrated, loaded, compacted and analyzed. */
async function load(size: Size, mix: Mix, latency: Latency): Promise<Loaded> {
  const url = urlOf(size);
  await dropDatabase(url);
  await migrate(url);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const t0 = performance.now();
  // Same sample in both databases and on every run: the in-flight rows first, so they are the
  // same rows in both.
  await client.query("SELECT setseed(0.42)");
  await insertTenants(client);
  const inFlightIds = await insertInFlight(client, mix);
  const inFlightAt = await dbNow(client);
  const history = historyFor(SIZES[size].jobs, inFlightIds.length + AWAITING);
  for (let have = 0; have < history; have += JOB_BATCH)
    await insertHistory(client, mix, have, Math.min(JOB_BATCH, history - have));
  await handleHistory(client);
  inFlightIds.push(...(await insertAwaiting(client, mix)));
  const callsStarted = performance.now();
  // The small size's calls go through the rollup trigger, one row at a time, as production
  // records them; the large size's are inserted without it and counted by one set-based
  // statement (ROLLUP_BUILDS) — 100 × the calls through the trigger would take most of an hour —
  // which the small size then proves gives exactly the trigger's rows.
  const viaTrigger = size === "small";
  if (!viaTrigger) await client.query(`ALTER TABLE "ModelCall" DISABLE TRIGGER ${ROLLUP_TRIGGER}`);
  for (let have = 0; have < SIZES[size].calls; have += BATCH) {
    await insertCalls(client, Math.min(BATCH, SIZES[size].calls - have), latency);
    process.stdout.write(`\r${size}: ${int(Math.min(SIZES[size].calls, have + BATCH))} calls`);
  }
  if (viaTrigger) await checkRollupBuilds(client);
  else {
    await client.query(`ALTER TABLE "ModelCall" ENABLE TRIGGER ${ROLLUP_TRIGGER}`);
    for (const b of ROLLUP_BUILDS) await client.query(`INSERT INTO "${b.table}" (${b.columns}) ${b.select}`);
  }
  const callsLoadS = (performance.now() - callsStarted) / 1000;
  // The set-based load updates each rollup row up to thousands of times inside one transaction,
  // where neither HOT pruning nor autovacuum can reclaim the old row versions (the rollup ends
  // up ~7× its size), and it writes the 30 days in random order. Production inserts one call
  // per transaction, so pages stay compact, and fills each hour's rows during that hour, so the
  // table is in hour order. CLUSTER on the primary key (hour first) restores both before
  // timing; ANALYZE tells the planner the tables' sizes (autovacuum would, a minute later).
  await client.query(`CLUSTER "ModelCallRollup" USING "ModelCallRollup_pkey"`);
  await client.query(`ANALYZE "ModelCallRollup"`);
  await client.query(`CLUSTER "ModelCallRollupDay" USING "ModelCallRollupDay_pkey"`);
  await client.query(`ANALYZE "ModelCallRollupDay"`);
  await client.query(`CLUSTER "ModelCallRollupWeek" USING "ModelCallRollupWeek_pkey"`);
  await client.query(`ANALYZE "ModelCallRollupWeek"`);
  await client.query(`VACUUM ANALYZE "ModelCall"`);
  await client.query(`VACUUM ANALYZE "Tenant"`);
  const rows = await countRows(client);
  if (rows.counted !== rows.calls)
    throw new Error(`${size}: the rollup counts ${rows.counted} calls, the table holds ${rows.calls}`);
  console.log(
    `\r${size}: ${int(rows.calls)} calls and ${int(rows.jobs)} jobs loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return { size, client, inFlightIds, inFlightAt, rows, callsLoadS };
}

/** Moves the in-flight rows' clocks forward by the time since they were set: the same ages in both databases. */
async function rebase(l: Loaded): Promise<void> {
  const now = await dbNow(l.client);
  await l.client.query(
    `UPDATE "Job" SET "createdAt" = "createdAt" + make_interval(secs => $2::float8), "updatedAt" = "updatedAt" + make_interval(secs => $2::float8),
                      "startedAt" = "startedAt" + make_interval(secs => $2::float8), "attemptStartedAt" = "attemptStartedAt" + make_interval(secs => $2::float8),
                      "heartbeatAt" = "heartbeatAt" + make_interval(secs => $2::float8), "finishedAt" = "finishedAt" + make_interval(secs => $2::float8),
                      "wakeUpAt" = "wakeUpAt" + make_interval(secs => $2::float8)
     WHERE id = ANY($1::uuid[])`,
    [l.inFlightIds, (now - l.inFlightAt) / 1000],
  );
  l.inFlightAt = now;
  await l.client.query(`VACUUM ANALYZE "Job"`);
}

/**
 * A queue job for every row in flight, in the state its row implies — delayed until its wake-up
 * (at least a moment: nothing promotes it here, so an overdue one stays delayed, as the overdue
 * rows say), waiting otherwise — under the bench's prefix. /stuck asks BullMQ about each open row,
 * and a row the queue has no job for is "lost from the queue": not the state this bench builds.
 * The in-flight rows have the same ids at both sizes, so one set of queue jobs serves both.
 */
async function enqueueInFlight(l: Loaded): Promise<void> {
  const { Queue } = await import("bullmq");
  const { redis } = await import("../lib/redis/client");
  const { env } = await import("../lib/env");
  const { rows } = await l.client.query<{
    id: string;
    kind: string;
    queue: string;
    status: string;
    queueJobId: string | null;
    wakeUpAt: Date | null;
  }>(
    `SELECT id::text, kind, queue, status::text, "queueJobId", "wakeUpAt" FROM "Job" WHERE id = ANY($1::uuid[]) AND status IN ('queued', 'running', 'delayed')`,
    [l.inFlightIds],
  );
  const now = await dbNow(l.client);
  for (const name of new Set(rows.map((r) => r.queue))) {
    const q = new Queue(name, { connection: redis(), prefix: env().BOUNDED_REDIS_PREFIX });
    await q.addBulk(
      rows
        .filter((r) => r.queue === name)
        .map((r) => ({
          name: r.kind,
          data: { jobId: r.id },
          opts: {
            jobId: r.queueJobId ?? r.id,
            delay: r.status === "delayed" ? Math.max(1, (r.wakeUpAt?.getTime() ?? now) - now) : undefined,
          },
        })),
    );
    await q.close();
  }
}

// ─── Timing (one child process per database) ────────────────────────────────────────────────

/** One query's run in a round. */
const runSchema = z.object({
  name: z.string(),
  target: z.boolean(),
  ms: z.number(),
  size: z.number(),
  detail: z.string(),
});
type Run = z.infer<typeof runSchema>;
const replySchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("ready") }),
  z.object({ type: z.literal("round"), runs: z.array(runSchema) }),
  z.object({ type: z.literal("error"), message: z.string() }),
]);
type Reply = z.infer<typeof replySchema>;
const requestSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("round") }),
  z.object({ type: z.literal("close") }),
]);

interface Query {
  name: string;
  /** Held to the ratio target. */
  target: boolean;
  run: () => Promise<unknown>;
  /** What the answer holds, for the table: rows, calls in the window… */
  size: (result: unknown) => number;
  detail?: (result: unknown) => string;
}

/** The child: the dashboard's lib functions against DATABASE_URL, one round per request. */
async function child(): Promise<void> {
  const send = (reply: Reply) =>
    new Promise<void>((resolve, reject) =>
      process.send!(reply, (err: Error | null) => (err ? reject(err) : resolve())),
    );
  const { getLatencyHistogram } = await import("../lib/modelcalls/queries");
  const { listJobs, countJobsByStatus } = await import("../lib/job-views/queries");
  const { listStuckJobs, countStuckByKind, listOverdueDelayedJobs } = await import("../lib/reports/stuck");
  const { listAwaitingOperator } = await import("../lib/diagnosis/awaiting-operator");
  const { projectItems, describeProjection } = await import("../lib/projection/projection");
  const { db, closeDb } = await import("../lib/db/client");
  const { closeRedis } = await import("../lib/redis/client");
  const { closeQueues } = await import("../lib/queues/queues");

  /** The id after which page `page` of the default list starts, as "Older jobs →" gets there. */
  const pageCursor = async (page: number): Promise<string> => {
    let after: string | undefined;
    for (let p = 1; p < page; p++) {
      const { nextAfter } = await listJobs(after ? { after } : {});
      if (!nextAfter) throw new Error(`the job list has fewer than ${page} pages`);
      after = nextAfter;
    }
    return after!;
  };
  const page10 = await pageCursor(10);
  // Halfway down the list: 5,000 jobs deep in the small database, 500,000 in the large one (by default).
  const [mid] = await db().$queryRaw<{ id: string }[]>`
    SELECT id FROM "Job" ORDER BY "createdAt" DESC, id DESC OFFSET (SELECT count(*) / 2 FROM "Job") LIMIT 1`;

  const listed = (r: unknown) => (r as { jobs: unknown[] }).jobs.length;
  const histogram = (range: (typeof RANGES)[number]): Query => ({
    name: `histogram_${range}`,
    target: true,
    run: () => getLatencyHistogram({ range }),
    size: (r) => {
      const h = r as Awaited<ReturnType<typeof getLatencyHistogram>>;
      return h.summary.total + h.tools.total;
    },
    detail: (r) => {
      const s = (r as Awaited<ReturnType<typeof getLatencyHistogram>>).summary;
      return `calls in the window; model p50 ${s.p50 ? `${(s.p50.ms / 1000).toFixed(1)} s` : "—"}, p99 ${s.p99 ? `${(s.p99.ms / 1000).toFixed(1)} s` : "—"}`;
    },
  });
  const queries: Query[] = [
    ...RANGES.map(histogram),
    { name: "jobs_list", target: true, run: () => listJobs({}), size: listed, detail: () => "first page" },
    {
      name: "jobs_list_page10",
      target: true,
      run: () => listJobs({ after: page10 }),
      size: listed,
      detail: () => "10th page",
    },
    {
      name: "jobs_list_deep",
      target: true,
      run: () => listJobs({ after: mid!.id }),
      size: listed,
      detail: () => "the page after the middle job",
    },
    {
      name: "jobs_list_status",
      target: true,
      run: () => listJobs({ status: "timed_out" }),
      size: listed,
      detail: () => "status=timed_out",
    },
    {
      name: "jobs_list_kind",
      target: true,
      run: () => listJobs({ kind: "bulk_ocr" }),
      size: listed,
      detail: () => "kind=bulk_ocr",
    },
    {
      name: "jobs_list_tenant",
      target: true,
      run: () => listJobs({ tenant: "tenant-001" }),
      size: listed,
      detail: () => "tenant=tenant-001",
    },
    {
      name: "jobs_list_search",
      target: true,
      run: () => listJobs({ q: "tenant-01" }),
      size: listed,
      detail: () => "q=tenant-01 (10 tenants)",
    },
    {
      name: "stuck",
      target: true,
      // As /stuck calls it (its default limit).
      run: () => listStuckJobs(),
      size: (r) => (r as unknown[]).length,
      detail: () => "listStuckJobs (query + queue state per row)",
    },
    {
      name: "stuck_count",
      target: true,
      run: () => countStuckByKind(),
      size: (r) => Object.values(r as Record<string, number>).reduce((a, b) => a + b, 0),
      detail: () => "countStuckByKind (the query alone)",
    },
    {
      name: "awaiting",
      target: true,
      run: () => listAwaitingOperator(),
      size: (r) => (r as unknown[]).length,
      detail: () => "listAwaitingOperator (ended jobs waiting on a person; /stuck's first group)",
    },
    {
      // Every read of app/(ops)/stuck/page.tsx, as it makes them.
      name: "stuck_page",
      target: true,
      run: () =>
        Promise.all([
          listStuckJobs(),
          listAwaitingOperator(),
          db().job.count({ where: { status: "delayed" } }),
          listOverdueDelayedJobs(),
        ]),
      size: (r) => (r as [unknown[]])[0].length,
      detail: () => "all of /stuck's reads",
    },
    {
      // What an import's start reads to project itself (lib/runs/attempt.ts), afresh every time.
      name: "import_start",
      target: true,
      run: () => projectItems("csv_import", 2_000, new Date(), { itemBytes: null, reuseMs: 0 }),
      size: (r) => (r ? 1 : 0),
      detail: (r) => {
        const p = r as Awaited<ReturnType<typeof projectItems>>;
        return p ? `projectItems: ${describeProjection(p)} (${p.source})` : "no projection";
      },
    },
    {
      name: "overview_counts",
      target: true,
      run: () => countJobsByStatus(),
      size: (r) => Object.values(r as Record<string, number>).reduce((a, b) => a + b, 0),
      detail: () => "countJobsByStatus: open jobs and those finished in the last 24 h",
    },
  ];

  process.on("message", (raw) => {
    const request = requestSchema.parse(raw);
    void (async () => {
      if (request.type === "close") {
        await closeQueues();
        await closeRedis();
        await closeDb();
        process.disconnect();
        // Whatever a library still holds open must not keep the bench waiting.
        setTimeout(() => process.exit(0), 5_000).unref();
        return;
      }
      const runs: Run[] = [];
      for (const q of queries) {
        const t0 = performance.now();
        const result = await q.run();
        runs.push({
          name: q.name,
          target: q.target,
          ms: performance.now() - t0,
          size: q.size(result),
          detail: q.detail?.(result) ?? "",
        });
      }
      await send({ type: "round", runs });
    })().catch((err: unknown) =>
      send({ type: "error", message: err instanceof Error ? (err.stack ?? err.message) : String(err) }).finally(() =>
        process.exit(1),
      ),
    );
  });
  await send({ type: "ready" });
}

/** A child process reading one database, and a way to ask it for the next reply. */
function startReader(size: Size, redisPrefix: string) {
  const proc: ChildProcess = fork(process.argv[1]!, ["--child"], {
    // Production time (the stuck definition compares budgets in real time), the bench's Redis keys.
    env: {
      ...process.env,
      DATABASE_URL: urlOf(size),
      BOUNDED_REDIS_PREFIX: redisPrefix,
      BOUNDED_TIME_SCALE: "1",
      LOG_LEVEL: "silent",
    },
    execArgv: process.execArgv,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const pending: ((reply: Reply) => void)[] = [];
  const early: Reply[] = [];
  proc.on("message", (raw) => {
    const reply = replySchema.parse(raw);
    const next = pending.shift();
    if (next) next(reply);
    else early.push(reply);
  });
  const exited = new Promise<never>((_, reject) =>
    proc.on("exit", (code) => reject(new Error(`the ${size} reader exited (${code})`))),
  );
  exited.catch(() => undefined);
  const next = async (): Promise<Reply> => {
    const reply =
      early.shift() ??
      (await withinCap(
        Promise.race([new Promise<Reply>((resolve) => pending.push(resolve)), exited]),
        REPLY_CAP_MS,
        `the ${size} reader's answer`,
      ));
    if (reply.type === "error") throw new Error(`the ${size} reader failed: ${reply.message}`);
    return reply;
  };
  return {
    ready: async () => void (await next()),
    round: async (): Promise<Run[]> => {
      proc.send({ type: "round" });
      const reply = await next();
      if (reply.type !== "round") throw new Error(`the ${size} reader answered ${reply.type}`);
      return reply.runs;
    },
    close: async () => {
      if (proc.exitCode !== null || !proc.connected) return;
      const done = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
      proc.send({ type: "close" });
      await done;
    },
  };
}

/** One timed pass: each size's medians, the ratios, and its RESULT line. */
function report(runs: Record<Size, Run[][]>, loaded: Loaded[], pass: number): void {
  console.log(`\n── pass ${pass} of ${PASSES} (load average ${os.loadavg()[0]!.toFixed(1)}) ──`);
  const names = runs.small[0]!.map((r) => r.name);
  const summary = Object.fromEntries(
    SIZE_NAMES.map((size) => {
      const last = runs[size].at(-1)!;
      return [
        size,
        new Map(
          names.map((name, k) => [name, { ms: median(runs[size].map((round) => round[k]!.ms)), last: last[k]! }]),
        ),
      ];
    }),
  ) as Record<Size, Map<string, { ms: number; last: Run }>>;

  for (const l of loaded) {
    const r = l.rows;
    console.log(
      `\n${l.size}: ${int(r.calls)} calls, ${int(r.rollups)} rollup rows (${r.rollupSize}); ${int(r.jobs)} jobs, ${int(r.open)} not finished (Job with indexes: ${r.jobSize})`,
    );
    console.log("  query               median ms       rows");
    for (const name of names) {
      const s = summary[l.size].get(name)!;
      console.log(`  ${name.padEnd(18)} ${fmt(s.ms).padStart(10)} ${int(s.last.size).padStart(10)}   ${s.last.detail}`);
    }
  }
  // Both sizes must see the same stuck set, or their /stuck reads are not comparable.
  const stuckAt = (size: Size) => summary[size].get("stuck_count")!.last.size;
  if (stuckAt("small") !== stuckAt("large"))
    throw new Error(
      `${stuckAt("small")} jobs are stuck at the small size, ${stuckAt("large")} at the large one: the sizes are not comparable`,
    );
  const awaitingAt = (size: Size) => summary[size].get("awaiting")!.last.size;
  if (awaitingAt("small") !== AWAITING || awaitingAt("large") !== AWAITING)
    throw new Error(
      `${awaitingAt("small")} jobs await an operator at the small size, ${awaitingAt("large")} at the large one; the data was built for ${AWAITING}`,
    );
  const stuckRows = stuckAt("small");
  if (stuckRows !== STUCK_EXPECTED) {
    console.log(
      `\nstuck: ${stuckRows} jobs at both sizes by the stuck page's rules; the data was built for ${STUCK_EXPECTED} (30 queued past their budget, 15 silent, 10 past their hard limit, 2 silent parts)`,
    );
  }

  const ratio = (name: string) => summary.large.get(name)!.ms / summary.small.get(name)!.ms;
  const targeted = names.filter((name) => summary.small.get(name)!.last.target);
  console.log(`\n  query               small ms   large ms   ratio   (target ≤ ${TARGET} for 100× the rows)`);
  for (const name of names) {
    const r = ratio(name);
    const mark = !targeted.includes(name) ? "  (not held to the target)" : r > TARGET ? "  OVER" : "";
    console.log(
      `  ${name.padEnd(18)} ${fmt(summary.small.get(name)!.ms).padStart(9)} ${fmt(summary.large.get(name)!.ms).padStart(10)} ${r.toFixed(2).padStart(7)}${mark}`,
    );
  }
  const maxRatio = Math.max(...targeted.map(ratio));
  console.log(
    `  ideal: a read whose cost follows what it returns (a page, the open rows, the rollup rows of its window), not the history, ` +
      `costs the same with ${GROWTH} × the rows: large ÷ small = 1.00; the worst targeted query: ${maxRatio.toFixed(2)} (target ≤ ${TARGET})`,
  );
  const jobsListMax = Math.max(...targeted.filter((n) => n.startsWith("jobs_list")).map(ratio));
  const perQuery = names
    .map(
      (n) =>
        `${n}_ms_small=${fmt(summary.small.get(n)!.ms)} ${n}_ms_large=${fmt(summary.large.get(n)!.ms)} ${n}_ratio=${ratio(n).toFixed(2)}`,
    )
    .join(" ");
  const small = loaded.find((l) => l.size === "small")!.rows;
  const large = loaded.find((l) => l.size === "large")!.rows;
  console.log(
    `RESULT bench=dashboard pass=${pass} passes=${PASSES} load1=${os.loadavg()[0]!.toFixed(1)} calls_small=${small.calls} calls_large=${large.calls} jobs_small=${small.jobs} jobs_large=${large.jobs} ` +
      `stuck_rows=${stuckRows} stuck_built=${STUCK_EXPECTED} awaiting_rows=${AWAITING} histogram_30d_ratio=${ratio("histogram_30d").toFixed(2)} jobs_list_ratio=${ratio("jobs_list").toFixed(2)} import_start_ratio=${ratio("import_start").toFixed(2)} ` +
      `jobs_list_max_ratio=${jobsListMax.toFixed(2)} stuck_ratio=${ratio("stuck").toFixed(2)} stuck_count_ratio=${ratio("stuck_count").toFixed(2)} ` +
      `max_ratio=${maxRatio.toFixed(2)} ideal_ratio=1.00 target_ratio=${TARGET} ok=${maxRatio <= TARGET} ratio_30d=${ratio("histogram_30d").toFixed(2)} ratio_24h=${ratio("histogram_24h").toFixed(2)} ${perQuery}`,
  );
}

// ─── The parent ──────────────────────────────────────────────────────────────────────────────

async function main(): Promise<void> {
  // On a Redis Cluster the prefix is a hash tag, as the configuration requires there.
  const ownPrefix = benchRedisPrefix("dashboard");
  const redisPrefix = process.env.BOUNDED_REDIS_CLUSTER === "1" ? `{${ownPrefix}}` : ownPrefix;
  // This process reads the catalog and the simulator's constants, and cleans the Redis keys.
  Object.assign(process.env, { BOUNDED_REDIS_PREFIX: redisPrefix, LOG_LEVEL: "silent" });
  const { MODEL_LATENCY } = await import("../workers/simulators/model");
  const { declaredBudget } = await import("../lib/budgets/budgets");
  const { INTERNAL_ERROR_MESSAGE } = await import("../lib/diagnosis/resume-policy");
  const { redis, closeRedis, scanKeys } = await import("../lib/redis/client");

  const budgets = MIX.map((m) => declaredBudget(m.queue, m.kind));
  const mix: Mix = {
    edges: edges(MIX.map((m) => m.share)),
    queues: MIX.map((m) => m.queue),
    kinds: MIX.map((m) => m.kind),
    soft: budgets.map((b) => b.softMs),
    hard: budgets.map((b) => b.hardMs),
    sources: budgets.map((b) => b.source),
    maxItems: MIX.map((m) => m.maxItems),
    syncIndex: 1 + MIX.findIndex((m) => m.kind === "marketplace_sync"),
    importIndex: 1 + MIX.findIndex((m) => m.kind === "csv_import"),
    internalError: INTERNAL_ERROR_MESSAGE,
  };

  const loaded: Loaded[] = [];
  const readers: ReturnType<typeof startReader>[] = [];
  try {
    for (const size of SIZE_NAMES) loaded.push(await load(size, mix, MODEL_LATENCY));
    const large = loaded.find((l) => l.size === "large")!;
    if (large.rows.calls < YEAR_OF_CALLS) {
      const perS = large.rows.calls / large.callsLoadS;
      console.log(
        `model calls at the large size: ${int(large.rows.calls)}, not a year's ${int(YEAR_OF_CALLS)}: at this run's ${int(Math.round(perS))} calls a second ` +
          `those would take ${Math.round(YEAR_OF_CALLS / perS / 60)} min to load (--calls ${YEAR_OF_CALLS / GROWTH} loads them at the large size)`,
      );
    }
    for (const l of loaded) await rebase(l);
    await enqueueInFlight(loaded[0]!);

    const reader = Object.fromEntries(SIZE_NAMES.map((size) => [size, startReader(size, redisPrefix)])) as Record<
      Size,
      ReturnType<typeof startReader>
    >;
    readers.push(...Object.values(reader));
    await Promise.all(readers.map((r) => r.ready()));
    // Turns: small then large, then large then small, … so neither always runs right after the other.
    const order = (i: number): Size[] => (i % 2 ? ["large", "small"] : ["small", "large"]);
    for (let i = 0; i < WARMUP_RUNS; i++) for (const size of order(i)) await reader[size].round();
    for (let pass = 1; pass <= PASSES; pass++) {
      const runs: Record<Size, Run[][]> = { small: [], large: [] };
      for (let i = 0; i < TIMED_RUNS; i++) for (const size of order(i)) runs[size].push(await reader[size].round());
      report(runs, loaded, pass);
    }
  } finally {
    await Promise.all(readers.map((r) => r.close().catch(() => undefined)));
    for (const l of loaded) await l.client.end().catch(() => undefined);
    // Only this run's keys: the prefix carries the process id.
    for await (const keys of scanKeys(redis(), `${redisPrefix}:*`, 1000)) if (keys.length) await redis().del(...keys);
    await closeRedis();
    if (keep) console.log(`kept ${SIZE_NAMES.map((s) => SIZES[s].database).join(" and ")} (--keep)`);
    else for (const size of SIZE_NAMES) await dropDatabase(urlOf(size));
  }
}

if (process.argv.includes("--child")) {
  child().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().catch(async (err: unknown) => {
    console.error(err);
    if (!keep) for (const size of SIZE_NAMES) await dropDatabase(urlOf(size)).catch(() => undefined);
    process.exit(1);
  });
}
