/**
 * `npm run bench:retention` (`npx tsx bench/retention.ts [--jobs N] [--rows N]`): what the
 * retention pass removes per second, against a bare DELETE of as many rows in the same run, and
 * what one imported row costs on disk before and after its job's detail is pruned.
 *
 * A database of its own (`bounded_bench_retention`, the project's migrations, dropped at the end)
 * loaded by set-based INSERT … SELECT generate_series statements: `--jobs` finished imports
 * (2,000) of `--rows` rows (100) each, ended 100 days ago, with what an import leaves behind per
 * row (its Transaction, JobItem and answer record), its timeline (4 events), a failure, its stored
 * file (80 bytes a row) and one model call per 8 rows 40 days ago. Then, timed:
 * - the baseline: a copy of the JobItem rows deleted by one bare `DELETE` (rows per second);
 * - one retention pass to the end (`pruneOnce`, the classes job_detail and model_calls, default
 *   days, and the rest after each batch the environment sets, BOUNDED_RETENTION_REST_FACTOR: 12 by
 *   default, so a thirteenth of the time deletes), rows removed per second, and its ratio to the baseline.
 * Sizes are `pg_total_relation_size` of every table the rows touch (indexes and TOAST included),
 * after `VACUUM FULL` so that the space a pass freed is counted as freed.
 *
 * Ends with `RESULT bench=retention jobs=… rows=… prune_rows_per_s=… bare_delete_rows_per_s=…
 * ratio_prune_to_bare=… bytes_per_row_before=… bytes_per_row_after_retention=… search_index_insert_ratio=…
 * search_index_us_per_row=… load1=…`.
 * The `search_index_*` figures are what the job search's trigram index costs an imported row's
 * insert: the same rows into a copy of Transaction with and without it.
 * `import_makespan_while_pruning` is `bench:import`'s (the platform's ceiling with passes pruning
 * the same history, bench/finished-imports.ts, back to back).
 */
import os from "node:os";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { dropDatabase, migrate } from "../scripts/db/migrate";
import { benchDatabaseUrl, flagNumber } from "./common";
import { finishedImports } from "./finished-imports";

const DATABASE = "bounded_bench_retention";
const JOBS = flagNumber("--jobs") ?? 2_000;
const ROWS = flagNumber("--rows") ?? 100;
/** Every table an imported row's job writes to. */
const TABLES = [
  "Job",
  "Transaction",
  "JobItem",
  "CategoryAnswerUse",
  "JobEvent",
  "JobItemFailure",
  "Upload",
  "ModelCall",
  "ModelCallRollup",
  "ModelCallRollupDay",
  "ModelCallRollupWeek",
  "KindFiguresDay",
];

const history = finishedImports(JOBS, ROWS);

async function bytesOf(client: pg.Client): Promise<number> {
  await client.query(`VACUUM FULL ${TABLES.map((t) => `"${t}"`).join(", ")}`);
  const { rows } = await client.query<{ bytes: string }>(
    `SELECT sum(pg_total_relation_size(format('%I', t)))::bigint AS bytes FROM unnest($1::text[]) t`,
    [TABLES],
  );
  return Number(rows[0]!.bytes);
}

/**
 * What the job search's trigram index costs an imported row: the same rows inserted into a copy of
 * Transaction with its other indexes and into one with the trigram index too, time against time.
 */
async function searchIndexCost(client: pg.Client): Promise<{ ratio: number; extraMs: number }> {
  const timed = async (table: string) => {
    const started = performance.now();
    await client.query(`INSERT INTO ${table} ${history.transactionColumns} ${history.transactions}`);
    return performance.now() - started;
  };
  await client.query(`CREATE TABLE bench_tx_plain (LIKE "Transaction" INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`);
  await client.query(`CREATE UNIQUE INDEX ON bench_tx_plain ("jobId", row)`);
  await client.query(`CREATE INDEX ON bench_tx_plain ("tenantId", date)`);
  await client.query(`CREATE TABLE bench_tx_search (LIKE bench_tx_plain INCLUDING ALL)`);
  await client.query(`CREATE INDEX ON bench_tx_search USING gin ((counterparty || ' ' || description) gin_trgm_ops)`);
  const plain = await timed("bench_tx_plain");
  const search = await timed("bench_tx_search");
  await client.query(`DROP TABLE bench_tx_plain, bench_tx_search`);
  return { ratio: search / plain, extraMs: search - plain };
}

/** Rows per second of one bare DELETE of a copy of the JobItem rows: what the database does with no policy around it. */
async function bareDeleteRate(client: pg.Client): Promise<number> {
  await client.query(`CREATE TABLE bench_item_copy AS SELECT * FROM "JobItem"`);
  await client.query(`CREATE INDEX ON bench_item_copy ("jobId", item)`);
  const started = performance.now();
  const { rowCount } = await client.query(`DELETE FROM bench_item_copy`);
  const seconds = (performance.now() - started) / 1000;
  await client.query(`DROP TABLE bench_item_copy`);
  return (rowCount ?? 0) / seconds;
}

async function main(): Promise<void> {
  const url = benchDatabaseUrl(DATABASE);
  await dropDatabase(url);
  await migrate(url);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const statement of history.load) await client.query(statement);
    const imported = JOBS * (ROWS - 1);
    const before = await bytesOf(client);
    const bare = await bareDeleteRate(client);
    const searchCost = await searchIndexCost(client);

    // The pass reads the bench's database: its environment points there before lib is loaded.
    process.env.DATABASE_URL = url;
    const { pruneOnce } = await import("../lib/retention/prune");
    const { closeDb } = await import("../lib/db/client");
    const started = performance.now();
    const pruned = await pruneOnce({ classes: ["job_detail", "model_calls"], classBudgetMs: Number.POSITIVE_INFINITY });
    const seconds = (performance.now() - started) / 1000;
    await closeDb();
    const removed = pruned.reduce((n, p) => n + Object.values(p.removed).reduce((a, b) => a + b, 0), 0);
    const after = await bytesOf(client);

    const perSecond = removed / seconds;
    console.log(`${JOBS.toLocaleString("en-US")} finished imports of ${ROWS} rows, ended 100 days ago`);
    for (const p of pruned)
      console.log(
        `  ${p.name}: ${Object.entries(p.removed)
          .map(([t, n]) => `${t} ${n.toLocaleString("en-US")}`)
          .join(", ")}`,
      );
    console.log(
      `pass: ${removed.toLocaleString("en-US")} rows in ${seconds.toFixed(2)} s; bare DELETE: ${Math.round(bare).toLocaleString("en-US")} rows/s`,
    );
    console.log(
      `on disk per imported row: ${Math.round(before / imported)} B before, ${Math.round(after / imported)} B after; ` +
        `inserting them with the search's trigram index takes ${searchCost.ratio.toFixed(2)} × the time without it (${((1000 * searchCost.extraMs) / imported).toFixed(1)} µs more a row)`,
    );
    console.log(
      `RESULT bench=retention jobs=${JOBS} rows=${imported} removed=${removed} prune_rows_per_s=${Math.round(perSecond)} ` +
        `bare_delete_rows_per_s=${Math.round(bare)} ratio_prune_to_bare=${(perSecond / bare).toFixed(2)} ` +
        `bytes_per_row_before=${Math.round(before / imported)} bytes_per_row_after_retention=${Math.round(after / imported)} ` +
        `search_index_insert_ratio=${searchCost.ratio.toFixed(2)} search_index_us_per_row=${((1000 * searchCost.extraMs) / imported).toFixed(1)} ` +
        `load1=${os.loadavg()[0]!.toFixed(1)}`,
    );
  } finally {
    await client.end();
    await dropDatabase(url);
  }
}

await main();
