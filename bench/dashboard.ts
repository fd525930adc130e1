/**
 * `npm run bench:dashboard` (`npx tsx bench/dashboard.ts`): how the latency histogram behind
 * /model-calls scales with the number of recorded calls.
 *
 * In a database of its own (`bounded_bench`, created with the project's migrations and dropped at
 * the end) it inserts 10,000 calls spread over 30 days — model calls from production's latency
 * distribution (the simulator's sampler: lognormal, median 5.5 s, p99 35 s, a rare tail to 11 min)
 * and the fast tool calls made in the same runs — with one set-based INSERT … SELECT
 * generate_series, so the rollup trigger counts them as production does. It times
 * `getLatencyHistogram` for every range (median of 21 runs after 5 warm-up rounds), grows the table
 * to 1,000,000 calls, times again, and prints the ratios large/small. The histogram reads the
 * hour rollup, so the target is a ratio ≤ 2 for 100× the calls.
 *
 * Ends with one line: `RESULT bench=dashboard calls_small=… calls_large=… histogram_30d_ms_small=…
 * histogram_30d_ms_large=… ratio_30d=… ratio_24h=…`.
 */
import { performance } from "node:perf_hooks";
import pg from "pg";
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import { parseEnv } from "../lib/env";
import { databaseName, maintenanceUrl, migrate, quoteIdent } from "../scripts/db/migrate";

const SMALL = 10_000;
const LARGE = 1_000_000;
/** Rows per INSERT statement while growing (each row also runs the rollup trigger). */
const BATCH = 165_000;
const WARMUP_RUNS = 5;
const TIMED_RUNS = 21;
/** Share of tool calls among the recorded calls (deterministic tools inside agent runs). */
const TOOL_SHARE = 0.2;
const RANGES = ["1h", "24h", "7d", "30d"] as const;
type Range = (typeof RANGES)[number];

// The bench database sits beside the configured one (same server and user).
const baseUrl = parseEnv(process.env).DATABASE_URL;
const benchUrl = (() => {
  const url = new URL(baseUrl);
  url.pathname = "/bounded_bench";
  return url.toString();
})();
const benchName = databaseName(benchUrl);

async function dropBenchDatabase(): Promise<void> {
  const admin = new pg.Client({ connectionString: maintenanceUrl(benchUrl) });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(benchName)} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

const fmt = (ms: number) => ms.toFixed(2);

async function main(): Promise<void> {
  await dropBenchDatabase();
  await migrate(benchUrl);
  // The one place a script points DATABASE_URL elsewhere: before the modules that read it load.
  process.env.DATABASE_URL = benchUrl;
  const { MODEL_LATENCY } = await import("../workers/simulators/model");
  const { getLatencyHistogram } = await import("../lib/modelcalls/queries");
  const { closeDb } = await import("../lib/db/client");

  const client = new pg.Client({ connectionString: benchUrl });
  await client.connect();
  // Same sample on every run.
  await client.query("SELECT setseed(0.42)");

  /**
   * `n` calls with `startedAt` uniformly over the last 30 days. Model calls: the simulator's
   * mixture (lognormal body by Box–Muller, rare uniform tail), ~1 % errors and ~0.3 % aborted by a
   * deadline; tool calls: lognormal around 30 ms. Queues and kinds as the catalog runs them.
   */
  const insertCalls = async (n: number) => {
    const { medianMs, sigma, tailShare, tailFromMs, maxMs } = MODEL_LATENCY;
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
  };

  const count = async () => {
    const { rows } = await client.query<{ calls: string; rollups: string; counted: string }>(
      `SELECT (SELECT count(*) FROM "ModelCall") AS calls, (SELECT count(*) FROM "ModelCallRollup") AS rollups,
              (SELECT coalesce(sum("count"), 0) FROM "ModelCallRollup") AS counted`,
    );
    return { calls: Number(rows[0]!.calls), rollups: Number(rows[0]!.rollups), counted: Number(rows[0]!.counted) };
  };

  /**
   * Median time per range. Warm-up first (every range, so connection pool, query plans and the
   * JIT are warm whichever range is timed first), then the ranges take turns run by run, so a
   * burst of load on the machine touches them all alike.
   */
  const timeAll = async () => {
    for (let i = 0; i < WARMUP_RUNS; i++) for (const range of RANGES) await getLatencyHistogram({ range });
    const runs = Object.fromEntries(RANGES.map((r) => [r, [] as number[]])) as Record<Range, number[]>;
    const last = {} as Record<Range, Awaited<ReturnType<typeof getLatencyHistogram>>>;
    for (let i = 0; i < TIMED_RUNS; i++) {
      for (const range of RANGES) {
        const t0 = performance.now();
        last[range] = await getLatencyHistogram({ range });
        runs[range].push(performance.now() - t0);
      }
    }
    return Object.fromEntries(RANGES.map((r) => [r, { ms: median(runs[r]), h: last[r] }])) as Record<Range, { ms: number; h: (typeof last)[Range] }>;
  };

  const measure = async (label: string) => {
    const c = await count();
    if (c.counted !== c.calls) throw new Error(`rollup counts ${c.counted} calls, the table holds ${c.calls}`);
    // The set-based load updates each rollup row up to thousands of times inside one transaction,
    // where neither HOT pruning nor autovacuum can reclaim the old row versions (the rollup ends
    // up ~7× its size), and it writes the 30 days in random order. Production inserts one call
    // per transaction, so pages stay compact, and fills each hour's rows during that hour, so the
    // table is in hour order. CLUSTER on the primary key (hour first) restores both before
    // timing; ANALYZE tells the planner the table's size.
    await client.query(`CLUSTER "ModelCallRollup" USING "ModelCallRollup_pkey"`);
    await client.query(`ANALYZE "ModelCallRollup"`);
    await client.query(`CLUSTER "ModelCallRollupDay" USING "ModelCallRollupDay_pkey"`);
    await client.query(`ANALYZE "ModelCallRollupDay"`);
    await client.query(`VACUUM ANALYZE "ModelCall"`);
    const { rows: size } = await client.query<{ size: string }>(`SELECT pg_size_pretty(pg_relation_size('"ModelCallRollup"')) AS size`);
    const results = {} as Record<Range, { ms: number; calls: number; p50: string; p99: string }>;
    const timed = await timeAll();
    for (const range of RANGES) {
      const { ms, h } = timed[range];
      const s = h.summary;
      results[range] = {
        ms,
        calls: s.total + h.tools.total,
        p50: s.p50 ? `${(s.p50.ms / 1000).toFixed(1)} s` : "—",
        p99: s.p99 ? `${(s.p99.ms / 1000).toFixed(1)} s` : "—",
      };
    }
    console.log(`\n${label}: ${c.calls.toLocaleString("en-US")} calls, ${c.rollups.toLocaleString("en-US")} rollup rows (${size[0]!.size})`);
    console.log("  range   median ms   calls in window   model p50   model p99");
    for (const range of RANGES) {
      const r = results[range];
      console.log(`  ${range.padEnd(5)} ${fmt(r.ms).padStart(11)} ${r.calls.toLocaleString("en-US").padStart(17)} ${r.p50.padStart(11)} ${r.p99.padStart(11)}`);
    }
    return { calls: c.calls, results };
  };

  try {
    let t0 = performance.now();
    await insertCalls(SMALL);
    console.log(`inserted ${SMALL.toLocaleString("en-US")} calls in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const small = await measure("small");

    t0 = performance.now();
    for (let have = SMALL; have < LARGE; have += BATCH) {
      await insertCalls(Math.min(BATCH, LARGE - have));
      process.stdout.write(`\rgrowing: ${Math.min(LARGE, have + BATCH).toLocaleString("en-US")} calls`);
    }
    console.log(`\ngrew to ${LARGE.toLocaleString("en-US")} calls in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const large = await measure("large");

    const ratio = (r: Range) => large.results[r].ms / small.results[r].ms;
    console.log("\n  range   small ms   large ms   ratio");
    for (const r of RANGES) {
      console.log(`  ${r.padEnd(5)} ${fmt(small.results[r].ms).padStart(10)} ${fmt(large.results[r].ms).padStart(10)} ${ratio(r).toFixed(2).padStart(7)}`);
    }
    console.log(
      `RESULT bench=dashboard calls_small=${small.calls} calls_large=${large.calls} histogram_30d_ms_small=${fmt(small.results["30d"].ms)} histogram_30d_ms_large=${fmt(large.results["30d"].ms)} ratio_30d=${ratio("30d").toFixed(2)} ratio_24h=${ratio("24h").toFixed(2)}`,
    );
  } finally {
    await client.end();
    await closeDb();
    await dropBenchDatabase();
  }
}

main().catch(async (err) => {
  console.error(err);
  await dropBenchDatabase().catch(() => undefined);
  process.exit(1);
});
