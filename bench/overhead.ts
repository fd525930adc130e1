/**
 * `npm run bench:overhead` (`npx tsx bench/overhead.ts`): what the policy wrapper costs per job.
 *
 * Jobs per second through the full policy, as `workers/main.ts` wires it — a BullMQ Worker whose
 * processor is `queueProcessor` → `runJob` (the attempt started and fenced on the Job row with
 * the budget this worker resolves, the projection every import pays at its start — its measured
 * item costs read, the plan made, the projection kept on the row — soft and hard timers,
 * heartbeat, the watchdog thread fed, the row finalized `completed` with its timeline event) and
 * a processor that does nothing — against a bare BullMQ Worker whose processor does nothing. The
 * policy's rows are what `createImport` leaves: a `csv_import` of 20 rows (as many as a small
 * upload in bench:fairness) with its stored file. Same process, same Redis, same worker options
 * (concurrency `BOUNDED_WORKER_CONCURRENCY`, lock duration), same enqueue options as
 * `enqueueJob`; rounds alternate (bare, policy) and the median of each is kept. The ideal is the
 * bare worker's rate: a policy that cost nothing (ratio 1); the target is 0.5. The PostgreSQL round
 * trips and Redis commands of the policy rounds are counted at the clients (every connection) and
 * given per job, beside the bare rounds' Redis commands.
 *
 * Then the same policy rounds again after `HISTORY_JOBS` finished imports were added to the
 * database (each with its stored file and an answered model call): a start that read history
 * would slow down; `history_ratio` is the rate with that history ÷ the rate without (target ≥ 0.9).
 *
 * Then, to say where the time goes, the policy's database work alone (`startAttempt`,
 * `fanOutIfTooBig` and `finalizeJob` called as `runJob` calls them, same concurrency, no queue)
 * with its PostgreSQL round trips counted, and, for the cost of the client, the start and the
 * finish alone (no projection) as one statement each over plain pg without Prisma — the floor of
 * two statements a job on this machine.
 *
 * A round that does not drain within its cap ends the bench with a FAIL line and exit code 1.
 * Runs in a database of its own beside `DATABASE_URL`'s (`bounded_bench_overhead`, created with
 * the project's migrations, dropped at the end) and a Redis prefix of its own (removed at the
 * end). Ends with one line:
 * `RESULT bench=overhead concurrency=… bare_jobs_per_s=… policy_jobs_per_s=… ratio=… ideal_ratio=1 …`.
 * `--history N` sets the finished imports of the history pass (default 100,000).
 */
import { randomBytes, randomUUID } from "node:crypto";
import os from "node:os";
import { performance } from "node:perf_hooks";
import pg from "pg";
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import { benchDatabaseUrl, benchRedisPrefix, countClientCalls, csvOf, flagNumber, withinCap } from "./common";
import { dropDatabase, migrate } from "../scripts/db/migrate";

/** Jobs per timed round, per variant. */
const JOBS = 3_000;
/** Untimed jobs per variant first: JIT, connection pools, prepared statements, scripts loaded. */
const WARMUP_JOBS = 300;
const ROUNDS = 3;
/** Rows for the database-only pass. */
const DB_ONLY_JOBS = 2_000;
/** Rows of each policy job's file: a small upload, projected to fit its budget (never split). */
const ROWS_PER_JOB = 20;
/** Real ms a round may take to drain: at the slowest rate seen (~100 jobs/s) a round takes 30 s. */
const DRAIN_CAP_MS = 300_000;
/** Finished imports in the database for the history pass. */
const HISTORY_JOBS = flagNumber("--history") ?? 100_000;
/** The policy's target against the bare worker, and the history pass's against the pass without. */
const TARGET_RATIO = 0.5;
const TARGET_HISTORY_RATIO = 0.9;

const benchUrl = benchDatabaseUrl("bounded_bench_overhead");
const prefix = benchRedisPrefix("overhead");

const dropBenchDatabase = () => dropDatabase(benchUrl);

/** startAttempt's statement over plain pg: the attempt, status and budget (an operator's kept), and the "started" event. */
const START_IN_ONE_STATEMENT = `
  WITH started AS (
    UPDATE "Job" SET attempt = attempt + 1, status = 'running', message = NULL, "heartbeatAt" = $2, "attemptStartedAt" = $2,
      "startedAt" = coalesce("startedAt", $2), "updatedAt" = $2,
      "budgetSoftMs" = CASE WHEN "budgetSource" LIKE 'operator:%' THEN "budgetSoftMs" ELSE $3 END,
      "budgetHardMs" = CASE WHEN "budgetSource" LIKE 'operator:%' THEN "budgetHardMs" ELSE $4 END,
      "budgetSource" = CASE WHEN "budgetSource" LIKE 'operator:%' THEN "budgetSource" ELSE $5 END
    WHERE id = $1::uuid AND status::text <> ALL($6::text[])
    RETURNING id, attempt, cursor, kind, queue, "tenantId", "parentId", total, processed, failed, params, "budgetSoftMs", "budgetHardMs", "budgetSource", "slotMsUsed"
  ), event AS (
    INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
    SELECT id, $2, 'started', attempt, 'Attempt ' || attempt || ' started (budget ' || round("budgetSoftMs" / 1000.0) || ' s soft, ' || round("budgetHardMs" / 1000.0) || ' s hard, ' || "budgetSource" || ')'
    FROM started
  )
  SELECT * FROM started`;

/** finalizeJob's statement over plain pg: the terminal status, message and event. */
const FINISH_IN_ONE_STATEMENT = `
  WITH done AS (
    UPDATE "Job" SET status = (CASE WHEN failed > 0 THEN 'completed_with_errors' ELSE 'completed' END)::"JobStatus", message = $3,
      "finishedAt" = now() AT TIME ZONE 'UTC', "heartbeatAt" = now() AT TIME ZONE 'UTC', "updatedAt" = now() AT TIME ZONE 'UTC'
    WHERE id = $1::uuid AND attempt = $2 AND status = 'running'
    RETURNING id, status, attempt
  )
  INSERT INTO "JobEvent" ("jobId", type, attempt, message, at) SELECT id, status::text, attempt, $3, now() AT TIME ZONE 'UTC' FROM done`;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Jobs per second, and this process's CPU time per job (all threads; load-independent, unlike the rate). */
interface Measured {
  rate: number;
  cpuMsPerJob: number;
}

/** A round, with its PostgreSQL round trips and Redis commands per job. */
interface Counted extends Measured {
  pgPerJob: number;
  redisPerJob: number;
}

async function main(): Promise<void> {
  await dropBenchDatabase();
  await migrate(benchUrl);
  // A benchmark's own environment: set before the modules that read it load.
  Object.assign(process.env, {
    DATABASE_URL: benchUrl,
    BOUNDED_REDIS_PREFIX: prefix,
    BOUNDED_TIME_SCALE: "1",
    LOG_LEVEL: "silent",
  });
  const { Queue, Worker } = await import("bullmq");
  const { env } = await import("../lib/env");
  const { db, closeDb } = await import("../lib/db/client");
  const { createRedis, closeRedis, redis, scanKeys } = await import("../lib/redis/client");
  const { queue, closeQueues } = await import("../lib/queues/queues");
  const { logger } = await import("../lib/log");
  const { scaled } = await import("../lib/time");
  const { resolveBudget } = await import("../lib/budgets/budgets");
  const { startAttempt } = await import("../lib/runs/attempt");
  const { finalizeJob } = await import("../lib/runs/finalize");
  const { fanOutIfTooBig } = await import("../lib/runs/fan-out");
  const { flushProjections, projectionCounts } = await import("../lib/runs/projection-writes");
  const { TERMINAL_STATUSES } = await import("../lib/core/job-statuses");
  const { ensureTenant } = await import("../lib/tenants/ensure-tenant");
  const { queueProcessor } = await import("../workers/queue-processor");
  const { startWatchdog } = await import("../lib/runs/watchdog");
  type Processor = import("../lib/runs/processor").Processor;

  const e = env();
  const concurrency = e.BOUNDED_WORKER_CONCURRENCY;
  // As workers/main.ts sets them.
  const lockDuration = Math.max(scaled(30_000), 5_000);
  const workerOptions = { prefix, concurrency, lockDuration, stalledInterval: lockDuration, autorun: false } as const;
  // As enqueueJob adds them: every job prioritized (one tenant's first place in line, so the
  // order stays first in, first out; BullMQ's prioritized set, not its plain list).
  const jobOptions = {
    priority: 2,
    attempts: 1,
    removeOnComplete: { age: 24 * 3600, count: 10_000 },
    removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
  };

  const log = logger("bench");
  const shutdown = new AbortController();
  const watchdog = startWatchdog();
  const tenantId = await ensureTenant("bench-overhead");
  const noop: Processor = async () => undefined;

  const file = Buffer.from(csvOf(ROWS_PER_JOB));
  /** Job rows as `createImport` leaves them: queued, its rows counted, its file stored, no budget resolved yet. */
  const createRows = async (n: number): Promise<string[]> => {
    const ids = Array.from({ length: n }, () => randomUUID());
    for (let i = 0; i < n; i += 1_000) {
      const chunk = ids.slice(i, i + 1_000);
      await db().job.createMany({
        data: chunk.map((id) => ({
          id,
          kind: "csv_import",
          queue: "imports",
          tenantId,
          total: ROWS_PER_JOB,
          budgetSoftMs: 0,
          budgetHardMs: 0,
          budgetSource: "pending",
          progressToken: randomBytes(16).toString("hex"),
        })),
      });
      await db().upload.createMany({
        data: chunk.map((jobId) => ({
          jobId,
          filename: "bench.csv",
          delimiter: ",",
          sizeBytes: file.byteLength,
          content: file,
        })),
      });
    }
    return ids;
  };

  /** Enqueues `ids`, then times one worker from start until every one of them has finished. */
  const drain = async (variant: "bare" | "policy", ids: string[]): Promise<Measured> => {
    const queueName = variant === "policy" ? "imports" : "bench-bare";
    const q = variant === "policy" ? queue("imports") : new Queue(queueName, { connection: redis(), prefix });
    for (let i = 0; i < ids.length; i += 1_000) {
      await q.addBulk(
        ids
          .slice(i, i + 1_000)
          .map((jobId) => ({ name: "csv_import", data: { jobId }, opts: { ...jobOptions, jobId } })),
      );
    }
    const connection = createRedis("worker");
    const processor =
      variant === "policy"
        ? queueProcessor("imports", {
            processors: { csv_import: noop },
            shutdown: shutdown.signal,
            log,
            watch: watchdog,
          })
        : async () => undefined;
    const worker = new Worker(queueName, processor, { connection, ...workerOptions });
    let completed = 0;
    const failures: string[] = [];
    const done = new Promise<void>((resolve) => {
      const settle = () => {
        if (completed + failures.length === ids.length) resolve();
      };
      worker.on("completed", () => {
        completed++;
        settle();
      });
      worker.on("failed", (_job, err) => {
        failures.push(err.message);
        settle();
      });
    });
    worker.on("error", (err) => console.error(`${variant} worker error: ${err.message}`));
    await worker.waitUntilReady();
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    void worker.run();
    await withinCap(
      done,
      DRAIN_CAP_MS,
      `${variant}: ${ids.length} jobs (${completed} completed, ${failures.length} failed so far)`,
    ).catch(async (err: unknown) => {
      await worker.close(true);
      throw err;
    });
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    await worker.close();
    await connection.quit();
    if (variant === "bare") await q.close();
    if (failures.length)
      throw new Error(`${variant}: ${failures.length} of ${ids.length} jobs failed, e.g. ${failures[0]}`);
    return { rate: ids.length / seconds, cpuMsPerJob: (cpu.user + cpu.system) / 1000 / ids.length };
  };

  const bareIds = (n: number) => Array.from({ length: n }, () => randomUUID());

  // Every PostgreSQL round trip and Redis command of this process, counted at the clients.
  const clientCalls = await countClientCalls();
  /** `drain`, with the round trips and commands it made per job. */
  const counted = async (variant: "bare" | "policy", ids: string[]) => {
    clientCalls.reset();
    const m = await drain(variant, ids);
    if (variant === "policy") await flushProjections();
    return { ...m, pgPerJob: clientCalls.pg / ids.length, redisPerJob: clientCalls.redis / ids.length };
  };

  // Warm-up, untimed.
  await drain("bare", bareIds(WARMUP_JOBS));
  await drain("policy", await createRows(WARMUP_JOBS));

  const rates: Record<"bare" | "policy", Counted[]> = { bare: [], policy: [] };
  const policyIds: string[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    rates.bare.push(await counted("bare", bareIds(JOBS)));
    const ids = await createRows(JOBS);
    policyIds.push(...ids);
    rates.policy.push(await counted("policy", ids));
  }
  // Every policy job really ran the policy: its row is completed, with its attempt's events.
  const completedRows = await db().job.count({
    where: { id: { in: policyIds }, status: "completed", attempt: 1, budgetSource: { not: "pending" } },
  });
  const events = await db().jobEvent.count({ where: { jobId: { in: policyIds } } });
  if (completedRows !== policyIds.length)
    throw new Error(`only ${completedRows} of ${policyIds.length} policy rows are completed`);
  // … and paid the projection: every start made one and handed it in to be kept on its row (written
  // with the others of its moment, on rows still running by then: a no-op job is often done first).
  await flushProjections();
  const projectedRows = projectionCounts().kept;
  if (projectedRows < policyIds.length + WARMUP_JOBS)
    throw new Error(`only ${projectedRows} of ${policyIds.length + WARMUP_JOBS} policy starts were projected`);

  // The same policy rounds with a history of finished imports in the database.
  const historySeconds = await addHistory(tenantId, HISTORY_JOBS, file);
  const withHistory: Counted[] = [];
  for (let round = 0; round < ROUNDS; round++) withHistory.push(await counted("policy", await createRows(JOBS)));

  /** Runs `job` on every id, `concurrency` at a time, without a queue. */
  const inSlots = async (ids: string[], job: (id: string) => Promise<void>): Promise<Measured> => {
    let next = 0;
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < ids.length) await job(ids[next++]!);
      }),
    );
    const cpu = process.cpuUsage(cpu0);
    return {
      rate: ids.length / ((performance.now() - t0) / 1000),
      cpuMsPerJob: (cpu.user + cpu.system) / 1000 / ids.length,
    };
  };

  // Where the time goes: the policy's database work alone, same concurrency, round trips counted.
  const dbOnlyIds = await createRows(DB_ONLY_JOBS);
  clientCalls.reset();
  const dbOnly = await inSlots(dbOnlyIds, async (id) => {
    const attemptStart = new Date();
    const run = await startAttempt(id, attemptStart, resolveBudget);
    if (!run) throw new Error(`row ${id} did not start`);
    const fanOut = await fanOutIfTooBig(run, attemptStart);
    if (fanOut.type !== "fits") throw new Error(`row ${id} was not projected to fit (${fanOut.type})`);
    // As runJob finishes a run: a message built from the row, and the row as the run started.
    await finalizeJob(id, run.attempt, {
      status: "completed",
      message: (row) => `Processed all ${row.processed + row.failed} rows.`,
      from: ["running"],
      known: run,
    });
  });
  // The projections' writes, batched across starts, are counted too.
  await flushProjections();
  const roundTripsPerJob = clientCalls.pg / dbOnlyIds.length;

  // The client's share: the same writes (attempt, status, budget, timeline events, final status)
  // in one statement to start and one to finish, over plain pg instead of Prisma.
  const pool = new pg.Pool({ connectionString: benchUrl, max: concurrency });
  const budget = resolveBudget("imports", "csv_import");
  const whatIfIds = await createRows(DB_ONLY_JOBS);
  clientCalls.reset();
  const whatIf = await inSlots(whatIfIds, async (id) => {
    const now = new Date();
    const started = await pool.query<{ attempt: number }>(START_IN_ONE_STATEMENT, [
      id,
      now,
      budget.softMs,
      budget.hardMs,
      budget.source,
      [...TERMINAL_STATUSES],
    ]);
    if (!started.rows[0]) throw new Error(`row ${id} did not start`);
    await pool.query(FINISH_IN_ONE_STATEMENT, [id, started.rows[0].attempt, "Processed all 0 rows."]);
  });
  const whatIfRoundTrips = clientCalls.pg / whatIfIds.length;
  clientCalls.restore();
  await pool.end();

  // Clean up: the bench's keys, database, threads and connections.
  await watchdog.stop();
  await closeQueues();
  const cleanup = createRedis("producer", { enableOfflineQueue: true });
  for await (const keys of scanKeys(cleanup, `${prefix}:*`, 1_000)) if (keys.length) await cleanup.del(...keys);
  await cleanup.quit();
  await closeRedis();
  await closeDb();
  await dropBenchDatabase();

  const pick = (ms: Counted[]) => ({
    rate: median(ms.map((m) => m.rate)),
    cpuMsPerJob: median(ms.map((m) => m.cpuMsPerJob)),
    pgPerJob: median(ms.map((m) => m.pgPerJob)),
    redisPerJob: median(ms.map((m) => m.redisPerJob)),
  });
  const bare = pick(rates.bare);
  const policy = pick(rates.policy);
  const history = pick(withHistory);
  const ratio = policy.rate / bare.rate;
  const historyRatio = history.rate / policy.rate;
  const f0 = (n: number) => Math.round(n).toString();
  const f2 = (n: number) => n.toFixed(2);
  const rounds = (ms: Counted[]) => ms.map((m) => f0(m.rate)).join(", ");
  const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
  console.log(
    `${ROUNDS} rounds × ${JOBS} jobs per variant whose processor does nothing (the policy's: ${ROWS_PER_JOB}-row csv_import rows with their file, projected at start), concurrency ${concurrency}, one process, one Redis (median of the rounds)`,
  );
  console.log(
    `  bare BullMQ worker:    ${f0(bare.rate)} jobs/s (rounds: ${rounds(rates.bare)}), ${f2(bare.cpuMsPerJob)} ms CPU, ${f2(bare.redisPerJob)} Redis commands per job`,
  );
  console.log(
    `  full policy (runJob):  ${f0(policy.rate)} jobs/s (rounds: ${rounds(rates.policy)}), ${f2(policy.cpuMsPerJob)} ms CPU, ${f2(policy.pgPerJob)} PostgreSQL round trips, ${f2(policy.redisPerJob)} Redis commands per job`,
  );
  console.log(
    `  ideal = the bare worker's rate, the policy costing nothing: ${f0(bare.rate)} jobs/s, ratio 1.00; target ≥ ${TARGET_RATIO} × ${f0(bare.rate)} = ${f0(TARGET_RATIO * bare.rate)} jobs/s`,
  );
  console.log(
    `  ratio policy / bare:   ${f2(ratio)} (${verdict(ratio >= TARGET_RATIO)}, target ≥ ${TARGET_RATIO}); rows completed ${completedRows}, starts projected ${projectedRows}, timeline events ${events}`,
  );
  console.log(
    `  with ${HISTORY_JOBS} finished imports in the database (added in ${historySeconds.toFixed(0)} s): ${f0(history.rate)} jobs/s (rounds: ${rounds(withHistory)}), ${f2(history.cpuMsPerJob)} ms CPU, ${f2(history.pgPerJob)} round trips per job; ÷ without: ${f2(historyRatio)} (${verdict(historyRatio >= TARGET_HISTORY_RATIO)}, target ≥ ${TARGET_HISTORY_RATIO})`,
  );
  console.log(`where the time goes (${DB_ONLY_JOBS} jobs each, same concurrency, no queue):`);
  console.log(
    `  startAttempt + fanOutIfTooBig (the projection) + finalizeJob alone: ${f0(dbOnly.rate)} jobs/s, ${f2(dbOnly.cpuMsPerJob)} ms CPU per job, ${f2(roundTripsPerJob)} PostgreSQL round trips per job`,
  );
  console.log(
    `  the floor: the start and the finish alone, one statement each over plain pg, no Prisma: ${f0(whatIf.rate)} jobs/s, ${f2(whatIf.cpuMsPerJob)} ms CPU per job, ${f2(whatIfRoundTrips)} round trips per job (ratio to bare at most ${f2(whatIf.rate / bare.rate)})`,
  );
  console.log(
    `machine: ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")} (1 / 5 / 15 min)`,
  );
  console.log(
    `RESULT bench=overhead jobs=${JOBS} rounds=${ROUNDS} concurrency=${concurrency} bare_jobs_per_s=${f0(bare.rate)} policy_jobs_per_s=${f0(policy.rate)} ratio=${f2(ratio)} ideal_ratio=1.00 target_ratio=${TARGET_RATIO} ok=${ratio >= TARGET_RATIO} bare_cpu_ms_per_job=${f2(bare.cpuMsPerJob)} policy_cpu_ms_per_job=${f2(policy.cpuMsPerJob)} pg_round_trips_per_job=${f2(policy.pgPerJob)} redis_commands_per_job=${f2(policy.redisPerJob)} bare_redis_commands_per_job=${f2(bare.redisPerJob)} history_jobs=${HISTORY_JOBS} history_jobs_per_s=${f0(history.rate)} history_ratio=${f2(historyRatio)} history_pg_round_trips_per_job=${f2(history.pgPerJob)} db_only_jobs_per_s=${f0(dbOnly.rate)} db_only_cpu_ms_per_job=${f2(dbOnly.cpuMsPerJob)} db_only_pg_round_trips_per_job=${f2(roundTripsPerJob)} rows_per_job=${ROWS_PER_JOB} floor_2_statements_jobs_per_s=${f0(whatIf.rate)} floor_cpu_ms_per_job=${f2(whatIf.cpuMsPerJob)} load1=${os.loadavg()[0]!.toFixed(1)}`,
  );
}

/**
 * `n` finished csv_import jobs of `tenantId`, created over the last six days, each with its stored
 * file and one answered model call (the triggers keep their rollups as for real ones). Returns
 * the seconds it took.
 */
async function addHistory(tenantId: string, n: number, file: Buffer): Promise<number> {
  const { db } = await import("../lib/db/client");
  const t0 = performance.now();
  const chunk = 20_000;
  for (let from = 0; from < n; from += chunk) {
    const size = Math.min(chunk, n - from);
    await db().$executeRaw`
      WITH jobs AS (
        INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt,
                           "budgetSoftMs", "budgetHardMs", "budgetSource", "progressToken", message,
                           "createdAt", "updatedAt", "startedAt", "finishedAt")
        SELECT gen_random_uuid(), 'csv_import', 'imports', ${tenantId}::uuid, 'completed', ${ROWS_PER_JOB}, ${ROWS_PER_JOB}, 0, ${ROWS_PER_JOB}, 1,
               600000, 900000, 'history', md5(random()::text), 'Imported all rows.',
               t, t, t, t + interval '20 seconds'
        FROM (SELECT (now() AT TIME ZONE 'UTC') - (random() * interval '6 days') AS t FROM generate_series(1, ${size})) g
        RETURNING id, "createdAt"
      ), uploads AS (
        INSERT INTO "Upload" ("jobId", filename, delimiter, "sizeBytes", content)
        SELECT id, 'history.csv', ',', ${file.byteLength}, ${file} FROM jobs
      )
      INSERT INTO "ModelCall" (queue, "jobKind", "jobId", model, type, lane, "startedAt", "durationMs", outcome, "batchSize", "promptTokens", "completionTokens")
      SELECT 'imports', 'csv_import', id, 'sim', 'model', 'sync', "createdAt", 5000, 'ok', 8, 600, 80 FROM jobs`;
  }
  return (performance.now() - t0) / 1000;
}

main().then(
  () => process.exit(0),
  async (err: unknown) => {
    console.error(`FAIL bench=overhead: ${err instanceof Error ? err.message : String(err)}`);
    await dropBenchDatabase().catch(() => undefined);
    process.exit(1);
  },
);
