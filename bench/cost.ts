/**
 * `npm run bench:cost` (`npx tsx bench/cost.ts`): what a CSV import costs with the stored category
 * answers and the provider's batch lane, against the same rows with both switched off, and whether
 * every import still ends within its budget when the batch service lets every batch expire.
 *
 * The rows are a realistic bank export of one tenant (bench/bank-export.ts: 300 counterparties
 * with Zipf-like frequencies, monthly fixtures, descriptions with dates, card numbers and SEPA
 * references as banks write them): two months of 5,000 rows, 10,000 in all. Each import runs
 * through the real path — `createImport` in this process, a worker process of its own per import
 * (a BullMQ Worker on `imports` running the catalog's processors, as workers/main.ts wires it) —
 * against the bundled model simulator in this process (its chat endpoint and its Batch API; the
 * batch turnaround drawn from its production distribution, median ≈ 7 min, and scaled):
 *
 * 1. **lane + answers** — tenant `bench-cost`, month 1, then month 2 once month 1 has finished;
 *    the batch lane on (`BOUNDED_BATCH_LANE_KINDS=csv_import`), the tenant's stored answers kept.
 * 2. **baseline** — tenant `bench-cost-baseline`, the same two files one after the other, the
 *    batch lane off (`BOUNDED_BATCH_LANE_KINDS=none`) and answers not reused
 *    (`BOUNDED_CATEGORY_ANSWER_REUSE=0`: every row asks, nothing shared within a job, nothing
 *    stored): the platform as it was before either, rows batched 8 to a direct call.
 * 3. **expiring** — tenant `bench-cost-expiring`, month 1, the batch lane on, and the simulated
 *    batch service letting every batch expire at its 24 h window (`POST /_control/model/batches`
 *    `{"expire": true}`): the job must give up on it at its last moment and finish directly.
 *
 * Every import's budget is 2 production hours soft, 3 hard
 * (`BOUNDED_BUDGET_IMPORTS_SOFT_S` / `_HARD_S`): room for the lane (its default 1 h turnaround
 * + 10 min for a cancel to settle + the projected direct time ÷ 0.7, which the projection
 * measures from the earlier imports' rows: ≈ 25–30 min here, where the rows' commits weigh more
 * than in production, see below).
 *
 * - `calls_per_row` = model calls ÷ rows, from the ModelCall records: every direct call (each
 *   attempt, whatever its rows) plus every batch request answered (a batch's record counts the
 *   requests it answered, `batchSize`).
 * - `cost_ratio` = the run's estimated cost ÷ the baseline's for the same rows: the recorded
 *   tokens at each lane's price (`estimateCostUsd(model, …, lane)`, the product's estimate; a
 *   batch token at the batch price).
 * - `within_budget` = every import of the run ended `completed` within its hard budget (wall clock,
 *   its creation → `finishedAt`); whether a batch-lane job also kept the lane's own wall-clock
 *   deadline (`JobBatch.deadlineAt`) is printed beside.
 * - `rows_committed_once` = each import's Transaction rows are exactly its rows, none twice.
 *
 * Goals printed beside: month 2 at most 0.1 calls a row and 0.2 × the baseline's cost; every run
 * within its budget. A missed goal is printed as missed; the bench exits 1 only when it did not
 * finish (an import over its cap, 1.2 × its hard budget + 2 real minutes: a FAIL line) or rows were
 * lost or committed twice.
 *
 * Time scale 0.05 (`-- --scale`): a production minute is 3 s, a median batch ≈ 20 s, the 2 h
 * budget 6 min. Smaller scales make the rows' commits (real milliseconds, not scaled) weigh more
 * in production time than they would in production. Runs in a database of its own
 * (`bounded_bench_cost` beside `DATABASE_URL`'s, created with the project's migrations, dropped
 * at the end) and a Redis prefix of its own (removed at the end). Ends with one line:
 * `RESULT bench=cost calls_per_row_month2=… cost_ratio=… within_budget=yes|no … rows_committed_once=yes|no …`.
 */
import { fork } from "node:child_process";
import os from "node:os";
import path from "node:path";
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import { bankExportCsv, generateBankExport, type BankRow } from "./bank-export";
import {
  BenchTimeout,
  benchDatabaseUrl,
  benchRedisPrefix,
  flagNumber,
  startImportsWorker,
  untilJobEnds,
  withinCap,
} from "./common";
import { dropDatabase, migrate } from "../scripts/db/migrate";

const SCALE = flagNumber("--scale") ?? 0.05;
const ROWS_PER_MONTH = 5_000;
const COUNTERPARTIES = 300;
const SEED = 7;
/** The provider's limits, for Bounded's limiter and the simulator alike (the defaults). */
const CONCURRENCY = 32;
const RPS = 30;
/** Every import's budget, production s: the lane's default 1 h turnaround + 10 min settling + the direct time ÷ 0.7 fit in it. */
const SOFT_S = 7_200;
const HARD_S = 10_800;
const GOAL_CALLS_PER_ROW_MONTH2 = 0.1;
const GOAL_COST_RATIO = 0.2;
/** Real ms an import may take before the bench gives up: 1.2 × its hard budget + 2 minutes. */
const CAP_MS = 1.2 * HARD_S * 1000 * SCALE + 120_000;
/** Real ms a worker process may take to stop. */
const STOP_CAP_MS = 60_000;

const REPO = path.resolve(import.meta.dirname, "..");
const benchUrl = benchDatabaseUrl("bounded_bench_cost");

type ChildMessage = { type: "ready" } | { type: "stopped" };

/** A worker process: one BullMQ Worker on `imports` until the parent says stop. */
async function child(): Promise<void> {
  const worker = await startImportsWorker();
  process.send!({ type: "ready" } satisfies ChildMessage);
  await new Promise<void>((resolve) => process.on("message", (m: { type: string }) => m.type === "stop" && resolve()));
  await worker.close();
  await new Promise<void>((resolve) => process.send!({ type: "stopped" } satisfies ChildMessage, () => resolve()));
  process.exit(0);
}

/** One import as measured. */
interface Measured {
  label: string;
  rows: number;
  status: string;
  processed: number;
  failed: number;
  /** Production s, creation → finishedAt. */
  wallS: number;
  /** Direct calls (attempts) and batch requests answered, from the ModelCall records. */
  syncCalls: number;
  batchRequests: number;
  costUsd: number;
  promptTokens: number;
  completionTokens: number;
  /** Where the rows' categories came from (CategoryAnswerUse). */
  sources: Record<string, number>;
  transactions: number;
  duplicateRows: number;
  lane: string | null;
  batch: {
    rows: number;
    completed: number;
    status: string;
    fallback: string | null;
    /** Production s: submitted → ended, and finishedAt against the lane's deadline (negative: before it). */
    turnaroundS: number | null;
    pastDeadlineS: number;
  } | null;
}

async function main(): Promise<void> {
  const benchStarted = performance.now();
  const prefix = benchRedisPrefix("cost");
  await dropDatabase(benchUrl);
  await migrate(benchUrl);
  Object.assign(process.env, {
    DATABASE_URL: benchUrl,
    BOUNDED_REDIS_PREFIX: prefix,
    BOUNDED_TIME_SCALE: String(SCALE),
    LOG_LEVEL: "silent",
    BOUNDED_PROVIDER_MODEL_CONCURRENCY: String(CONCURRENCY),
    BOUNDED_PROVIDER_MODEL_RPS: String(RPS),
    BOUNDED_SIM_MODEL_ERROR_RATE: "0",
    BOUNDED_BUDGET_IMPORTS_SOFT_S: String(SOFT_S),
    BOUNDED_BUDGET_IMPORTS_HARD_S: String(HARD_S),
  });
  for (const v of ["BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT", "BOUNDED_WORKER_QUEUES", "BOUNDED_MODEL_TPM"])
    delete process.env[v];
  const { db, closeDb } = await import("../lib/db/client");
  const { env } = await import("../lib/env");
  const { createRedis, closeRedis, scanKeys } = await import("../lib/redis/client");
  const { closeQueues } = await import("../lib/queues/queues");
  const { createImport } = await import("../lib/imports/create-import");
  const { estimateCostUsd, priceOf } = await import("../lib/modelcalls/usage");
  const { startSimulators } = await import("../workers/simulators/server");
  const { BATCH_TURNAROUND } = await import("../workers/simulators/model-batches");
  const { categoryQuestion } = await import("../lib/modelcalls/choose-category");

  const sim = await startSimulators({
    model: { errorRate: 0, timeScale: SCALE, limits: { concurrency: CONCURRENCY, rps: RPS } },
  });
  const batchFaults = async (body: Record<string, unknown>) => {
    const res = await fetch(`${sim.url}/_control/model/batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`the simulator refused the batch fault switch: ${res.status} ${await res.text()}`);
  };

  const exported = generateBankExport({
    seed: SEED,
    months: 2,
    rowsPerMonth: ROWS_PER_MONTH - 11,
    counterparties: COUNTERPARTIES,
  });
  const secondMonth = exported.rows.find((r) => r.date.slice(0, 7) !== exported.rows[0]!.date.slice(0, 7))!.date;
  const month1: BankRow[] = exported.rows.filter((r) => r.date < secondMonth);
  const month2: BankRow[] = exported.rows.filter((r) => r.date >= secondMonth);
  const csvOf = (rows: BankRow[]) => new TextEncoder().encode(bankExportCsv(rows));
  // The ideal, from the rows alone: a question (what the prompt shows of a row: its direction and
  // its normalised counterparty and description) is asked once, and never again once answered.
  const questionOf = (r: BankRow) => JSON.stringify(categoryQuestion(r));
  const whoOf = (r: BankRow) => JSON.stringify(((q) => [q.direction, q.counterparty])(categoryQuestion(r)));
  const questions1 = new Set(month1.map(questionOf));
  const questions2New = new Set(month2.map(questionOf).filter((q) => !questions1.has(q)));
  const who1 = new Set(month1.map(whoOf));
  const who2New = new Set(month2.map(whoOf).filter((w) => !who1.has(w)));
  const ideal = {
    month1: questions1.size / month1.length,
    month2: questions2New.size / month2.length,
    month2ByCounterparty: who2New.size / month2.length,
    month2RowsOfKnownCounterparties: month2.filter((r) => who1.has(whoOf(r))).length,
  };

  const prices = env().BOUNDED_MODEL_PRICES;
  const workers = new Set<ReturnType<typeof fork>>();

  /** Imports `rows` for `tenant` with a worker process of its own (`workerEnv` on top of the bench's), to its end. */
  const measure = async (
    label: string,
    tenant: string,
    rows: BankRow[],
    workerEnv: Record<string, string>,
  ): Promise<Measured> => {
    const worker = fork(import.meta.filename, ["--child", label], {
      cwd: REPO,
      execArgv: ["--import", import.meta.resolve("tsx")],
      env: { ...process.env, MODEL_BASE_URL: sim.modelBaseUrl, ...workerEnv },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    workers.add(worker);
    const said = (type: ChildMessage["type"]) =>
      new Promise<void>((resolve, reject) => {
        worker.on("message", (m: ChildMessage) => m.type === type && resolve());
        worker.once("exit", (code) =>
          reject(new Error(`${label}: the worker process exited (${code}) before "${type}"`)),
        );
      });
    await withinCap(said("ready"), STOP_CAP_MS, `${label}: the worker process's start`);
    const created = await createImport({ tenant, filename: `${label}.csv`, bytes: csvOf(rows) });
    if (created.type !== "created") throw new Error(`${label}: the import was refused: ${created.message}`);
    const { jobId } = created;
    try {
      await withinCap(untilJobEnds(jobId), CAP_MS, `${label}: the ${rows.length}-row import`);
      worker.send({ type: "stop" });
      await withinCap(said("stopped"), STOP_CAP_MS, `${label}: the worker process's stop`);
    } catch (err) {
      worker.kill();
      if (err instanceof BenchTimeout) {
        const row = await db().job.findUniqueOrThrow({
          where: { id: jobId },
          select: { status: true, processed: true, failed: true, message: true },
        });
        err.message += ` (cap ${(CAP_MS / 1000).toFixed(0)} real s): ${row.status}, ${row.processed + row.failed} of ${rows.length} rows, ${row.message ?? "no message"}`;
      }
      throw err;
    } finally {
      workers.delete(worker);
    }

    const job = await db().job.findUniqueOrThrow({
      where: { id: jobId },
      select: { status: true, processed: true, failed: true, createdAt: true, finishedAt: true },
    });
    const calls = await db().$queryRaw<
      {
        type: string;
        lane: string;
        model: string;
        calls: number;
        requests: number;
        prompt: number;
        completion: number;
      }[]
    >`
      SELECT type::text AS type, lane, model, count(*)::int AS calls, sum("batchSize")::int AS requests,
             coalesce(sum("promptTokens"), 0)::float8 AS prompt, coalesce(sum("completionTokens"), 0)::float8 AS completion
      FROM "ModelCall" WHERE "jobId" = ${jobId}::uuid AND type IN ('model', 'batch') GROUP BY 1, 2, 3`;
    let syncCalls = 0;
    let batchRequests = 0;
    let costUsd = 0;
    let promptTokens = 0;
    let completionTokens = 0;
    for (const c of calls) {
      if (c.type === "batch") batchRequests += c.requests;
      else syncCalls += c.calls;
      const cost = estimateCostUsd(c.model, c.prompt, c.completion, prices, c.lane === "batch" ? "batch" : "sync");
      if (cost === null) throw new Error(`${label}: model ${c.model} has no price in BOUNDED_MODEL_PRICES`);
      costUsd += cost;
      promptTokens += c.prompt;
      completionTokens += c.completion;
    }
    const sources = Object.fromEntries(
      (
        await db().$queryRaw<{ source: string; n: number }[]>`
          SELECT source::text AS source, count(*)::int AS n FROM "CategoryAnswerUse" WHERE "jobId" = ${jobId}::uuid GROUP BY 1`
      ).map((r) => [r.source, r.n]),
    );
    const [counts] = await db().$queryRaw<{ transactions: number; duplicates: number }[]>`
      SELECT (SELECT count(*)::int FROM "Transaction" WHERE "jobId" = ${jobId}::uuid) AS transactions,
             (SELECT count(*)::int FROM (SELECT row FROM "Transaction" WHERE "jobId" = ${jobId}::uuid GROUP BY row HAVING count(*) > 1) d) AS duplicates`;
    const laneEvent = await db().jobEvent.findFirst({
      where: { jobId, type: "lane" },
      orderBy: { id: "asc" },
      select: { message: true },
    });
    const batch = await db().jobBatch.findUnique({ where: { jobId } });
    const finishedAt = job.finishedAt ?? new Date();
    const prod = (realMs: number) => realMs / SCALE / 1000;
    return {
      label,
      rows: rows.length,
      status: job.status,
      processed: job.processed,
      failed: job.failed,
      wallS: prod(finishedAt.getTime() - job.createdAt.getTime()),
      syncCalls,
      batchRequests,
      costUsd,
      promptTokens,
      completionTokens,
      sources,
      transactions: counts!.transactions,
      duplicateRows: counts!.duplicates,
      lane: laneEvent?.message ?? null,
      batch: batch && {
        rows: batch.rows,
        completed: batch.completed,
        status: batch.status,
        fallback: batch.fallback,
        turnaroundS: batch.endedAt ? prod(batch.endedAt.getTime() - batch.submittedAt.getTime()) : null,
        pastDeadlineS: prod(finishedAt.getTime() - batch.deadlineAt.getTime()),
      },
    };
  };

  const LANE_ON = { BOUNDED_BATCH_LANE_KINDS: "csv_import" };
  const BASELINE = { BOUNDED_BATCH_LANE_KINDS: "none", BOUNDED_CATEGORY_ANSWER_REUSE: "0" };
  let runs: Measured[];
  try {
    await batchFaults({ expire: false, failing: false, turnaroundMs: null });
    const laneM1 = await measure("lane-month1", "bench-cost", month1, LANE_ON);
    const laneM2 = await measure("lane-month2", "bench-cost", month2, LANE_ON);
    const baseM1 = await measure("baseline-month1", "bench-cost-baseline", month1, BASELINE);
    const baseM2 = await measure("baseline-month2", "bench-cost-baseline", month2, BASELINE);
    if (baseM1.batch || baseM2.batch) throw new Error("the baseline took the batch lane: it was not switched off");
    if ((baseM1.sources.job ?? 0) + (baseM2.sources.cache ?? 0) > 0)
      throw new Error("the baseline reused answers: BOUNDED_CATEGORY_ANSWER_REUSE=0 was not honoured");
    await batchFaults({ expire: true });
    const expiring = await measure("expiring-month1", "bench-cost-expiring", month1, LANE_ON);
    await batchFaults({ expire: false });
    runs = [laneM1, laneM2, baseM1, baseM2, expiring];
  } finally {
    for (const w of workers) w.kill();
    await sim.close();
    await closeQueues();
    const cleanup = createRedis("producer", { enableOfflineQueue: true });
    for await (const keys of scanKeys(cleanup, `${prefix}:*`, 1_000)) if (keys.length) await cleanup.del(...keys);
    await cleanup.quit();
    await closeRedis();
    await closeDb();
    await dropDatabase(benchUrl);
  }
  const [laneM1, laneM2, baseM1, baseM2, expiring] = runs as [Measured, Measured, Measured, Measured, Measured];

  const f0 = (n: number) => Math.round(n).toLocaleString("en-US");
  const f1 = (n: number) => n.toFixed(1);
  const f2 = (n: number) => n.toFixed(2);
  const f3 = (n: number) => n.toFixed(3);
  const usd = (n: number) => `$${n.toFixed(4)}`;
  const callsOf = (m: Measured) => m.syncCalls + m.batchRequests;
  const perRow = (...ms: Measured[]) => ms.reduce((s, m) => s + callsOf(m), 0) / ms.reduce((s, m) => s + m.rows, 0);
  const costOf = (...ms: Measured[]) => ms.reduce((s, m) => s + m.costUsd, 0);
  const inBudget = (m: Measured) => m.status === "completed" && m.wallS <= HARD_S;
  const once = (m: Measured) =>
    m.transactions === m.processed && m.processed + m.failed === m.rows && m.duplicateRows === 0 && m.failed === 0;
  const yes = (b: boolean) => (b ? "yes" : "no");

  const price = priceOf(env().MODEL_NAME, "sync", prices);
  const batchPrice = priceOf(env().MODEL_NAME, "batch", prices);
  console.log(
    `bench:cost — time scale ${SCALE} (production seconds = real ÷ ${SCALE}; every figure below is production time unless it says real); ` +
      `provider limits ${CONCURRENCY} in flight, ${RPS} requests/s (Bounded's limiter and the simulator); simulator error rate 0; ` +
      `batch turnaround drawn from the simulator's distribution (median ${f1(BATCH_TURNAROUND.medianMs / 60_000)} min, σ ${BATCH_TURNAROUND.sigma}, ${BATCH_TURNAROUND.expireShare * 100} % expire)`,
  );
  console.log(
    `rows: a bank export of one tenant (seed ${SEED}, ${COUNTERPARTIES} counterparties, Zipf-like), ${month1.length} rows of ${month1[0]!.date.slice(0, 7)} and ${month2.length} of ${month2[0]!.date.slice(0, 7)}; ` +
      `every import's budget ${SOFT_S / 60} min soft / ${HARD_S / 60} min hard; prices (${env().MODEL_NAME}, USD per million tokens): sync ${price?.prompt} prompt / ${price?.completion} completion, batch ${batchPrice?.prompt} / ${batchPrice?.completion}`,
  );
  console.log("");
  for (const m of runs) {
    const src = ["model", "job", "cache"].map((s) => `${m.sources[s] ?? 0} ${s}`).join(", ");
    console.log(
      `  ${m.label}: ${m.rows} rows, ${m.status} (${m.processed} processed, ${m.failed} failed) in ${f0(m.wallS)} s of the ${f0(HARD_S)} s hard budget; ` +
        `${m.syncCalls} direct calls + ${m.batchRequests} batch requests answered = ${f3(callsOf(m) / m.rows)} a row; ` +
        `${f0(m.promptTokens)} prompt + ${f0(m.completionTokens)} completion tokens, ${usd(m.costUsd)}; categories from: ${src}; ` +
        `${m.transactions} Transaction rows, ${m.duplicateRows} rows twice`,
    );
    if (m.lane) console.log(`    ${m.lane}`);
    if (m.batch)
      console.log(
        `    batch: ${m.batch.rows} requests, ${m.batch.status} with ${m.batch.completed} answered; ${m.batch.turnaroundS === null ? "not ended" : `ended ${f0(m.batch.turnaroundS)} s after it was sent`}` +
          `${m.batch.fallback ? ` (${m.batch.fallback}: finished directly)` : ""}; the job finished ${f0(Math.abs(m.batch.pastDeadlineS))} s ${m.batch.pastDeadlineS <= 0 ? "before" : "after"} the lane's deadline`,
      );
  }
  console.log("");

  const month2PerRow = perRow(laneM2);
  const month1PerRow = perRow(laneM1);
  const costRatio = costOf(laneM1, laneM2) / costOf(baseM1, baseM2);
  const month2CostRatio = costOf(laneM2) / costOf(baseM2);
  const month1CostRatio = costOf(laneM1) / costOf(baseM1);
  const basePerRow = perRow(baseM1, baseM2);
  const expiringPerRow = perRow(expiring);
  const expiringCostRatio = costOf(expiring) / costOf(baseM1);
  const withinBudget = inBudget(laneM1) && inBudget(laneM2);
  const baseWithinBudget = inBudget(baseM1) && inBudget(baseM2);
  const expiringWithinBudget = inBudget(expiring);
  const committedOnce = runs.every(once);
  // The fault is exercised only when the expiring run took the lane and gave up on its batch.
  const expiringFellBack = expiring.batch !== null && expiring.batch.fallback !== null;
  const cacheHitsMonth2 = laneM2.sources.cache ?? 0;

  console.log(
    `calls a row: month 1 ${f3(month1PerRow)}, month 2 ${f3(month2PerRow)} (goal ≤ ${GOAL_CALLS_PER_ROW_MONTH2}); baseline ${f3(basePerRow)}; expiring ${f3(expiringPerRow)}`,
  );
  console.log(
    `ideal (from the rows, each question asked once and never again): month 1 ${questions1.size} questions ÷ ${month1.length} rows = ${f3(ideal.month1)} a row; ` +
      `month 2 ${questions2New.size} questions not in month 1 ÷ ${month2.length} rows = ${f3(ideal.month2)} a row. ` +
      `Were a question only the direction and the counterparty: month 2 would have ${who2New.size} new ones (${f3(ideal.month2ByCounterparty)} a row); ${ideal.month2RowsOfKnownCounterparties} of its rows have a counterparty month 1 had`,
  );
  console.log(
    `cost: ${usd(costOf(laneM1, laneM2))} for both months against the baseline's ${usd(costOf(baseM1, baseM2))} = ${f2(costRatio)} × (month 1 ${f2(month1CostRatio)} ×, month 2 ${f2(month2CostRatio)} ×, goal ≤ ${GOAL_COST_RATIO}); ` +
      `expiring ${usd(costOf(expiring))} against the baseline's month 1 ${usd(costOf(baseM1))} = ${f2(expiringCostRatio)} ×`,
  );
  console.log(
    `stored answers: month 2 read ${cacheHitsMonth2} of its ${laneM2.rows} rows' categories from month 1's answers; ${laneM1.sources.job ?? 0} + ${laneM2.sources.job ?? 0} rows shared an earlier row's answer within their own import`,
  );
  if (month2PerRow > GOAL_CALLS_PER_ROW_MONTH2)
    console.log(`goal missed: month 2 took ${f3(month2PerRow)} calls a row (goal ≤ ${GOAL_CALLS_PER_ROW_MONTH2})`);
  if (costRatio > GOAL_COST_RATIO || month2CostRatio > GOAL_COST_RATIO)
    console.log(
      `goal missed: cost ${f2(costRatio)} × the baseline's for both months, ${f2(month2CostRatio)} × for month 2 (goal ≤ ${GOAL_COST_RATIO})`,
    );
  if (month2PerRow > GOAL_CALLS_PER_ROW_MONTH2 && cacheHitsMonth2 < laneM2.rows / 2)
    console.log(
      `  why: a stored answer is reused only for the same question — the same direction, counterparty and description, whitespace, case and words of three or more digits aside — ` +
        `so month 2 asked ${laneM2.sources.model ?? 0} of its ${laneM2.rows} rows again`,
    );
  if (callsOf(laneM1) > callsOf(baseM1))
    console.log(
      `  why: the batch lane sends one request a row (the single-row prompt, the category list in each), direct calls take ${f1(baseM1.rows / Math.max(1, baseM1.syncCalls))} rows each: ` +
        `${f0((laneM1.promptTokens + laneM1.completionTokens) / laneM1.rows)} tokens a row through the lane against ${f0((baseM1.promptTokens + baseM1.completionTokens) / baseM1.rows)} directly, at ${batchPrice && price ? f2(batchPrice.prompt / price.prompt) : "?"} × the price`,
    );
  for (const [name, ok] of [
    ["lane + answers", withinBudget],
    ["baseline", baseWithinBudget],
    ["expiring", expiringWithinBudget],
  ] as const)
    if (!ok) console.log(`goal missed: the ${name} run did not end completed within its budget`);
  if (!expiringFellBack)
    console.log(
      `goal missed: the expiring run ${expiring.batch ? "got its batch's answers" : "did not take the batch lane (see its lane decision above)"}, so finishing directly after an expired batch was not measured`,
    );
  if (!committedOnce) console.log("rows lost or committed twice: see the Transaction counts above");
  const load = os.loadavg();
  console.log(
    `machine: ${os.cpus().length} cores, load average ${load.map((l) => l.toFixed(1)).join(" / ")} (1 / 5 / 15 min); bench took ${f0((performance.now() - benchStarted) / 1000)} s (real)`,
  );
  console.log(
    `RESULT bench=cost calls_per_row_month2=${f3(month2PerRow)} calls_per_row_month1=${f3(month1PerRow)} cost_ratio=${f2(costRatio)} ` +
      `cost_ratio_month2=${f2(month2CostRatio)} within_budget=${yes(withinBudget)} baseline_calls_per_row=${f3(basePerRow)} baseline_within_budget=${yes(baseWithinBudget)} ` +
      `expiring_calls_per_row=${f3(expiringPerRow)} expiring_cost_ratio=${f2(expiringCostRatio)} expiring_within_budget=${yes(expiringWithinBudget)} expiring_fell_back=${yes(expiringFellBack)} ` +
      `rows_committed_once=${yes(committedOnce)} ideal_calls_per_row_month2=${f3(ideal.month2)} ideal_calls_per_row_month1=${f3(ideal.month1)} rows=${month1.length + month2.length} cache_hits_month2=${cacheHitsMonth2} ` +
      `goal_calls_per_row_month2=${GOAL_CALLS_PER_ROW_MONTH2} goal_cost_ratio=${GOAL_COST_RATIO} ` +
      `goals_met=${yes(month2PerRow <= GOAL_CALLS_PER_ROW_MONTH2 && costRatio <= GOAL_COST_RATIO && month2CostRatio <= GOAL_COST_RATIO && withinBudget && baseWithinBudget && expiringWithinBudget && expiringFellBack)} scale=${SCALE} load1=${load[0]!.toFixed(1)}`,
  );
  if (!committedOnce) process.exit(1);
}

if (process.argv[2] === "--child") {
  child().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().then(
    () => process.exit(0),
    async (err: unknown) => {
      console.error(`FAIL bench=cost: ${err instanceof Error ? err.message : String(err)}`);
      await dropDatabase(benchUrl).catch(() => undefined);
      process.exit(1);
    },
  );
}
