/**
 * `npm run bench:import` (`npx tsx bench/import.ts [--only-pruning | --only-ceiling] [--prune-jobs N]`): how close a CSV import comes to what the
 * model provider allows, against the serial loop, and whether its memory stays flat with size.
 *
 * The real path: `createImport` (Job row, stored file, queue job) in this process, and a worker
 * process of its own per measurement — a BullMQ Worker running `queueProcessor` with the catalog's
 * PROCESSORS, as workers/main.ts wires it — against the bundled model simulator (production latency
 * distribution, a batch's latency × (1 + 0.1 × (rows − 1)), error rate 0) in this process.
 * Bounded's provider limiter and the simulator get the same limits, 32 calls in flight and 30
 * requests a second, so a call Bounded lets through beyond them shows as a 429.
 *
 * 1. 2,000 rows with the catalog's items in flight and model batches: the makespan (the Job row's
 *    creation → its `finishedAt`) in production seconds, against the provider-bound ideal from the
 *    run's parameters, `max(calls ÷ R, calls × mean call ÷ C)` with full batches (⌈rows ÷ batch⌉
 *    calls) and the simulator's mean call for a full batch (bench/common.ts, `providerIdeal`) —
 *    never from the calls the run made, so half-full batches show as a miss, not as a larger
 *    yardstick; every row processed exactly once.
 * 2. The serial loop (`BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT=1`: one row at a time, alone in its
 *    call) on a sample, extrapolated linearly to 2,000 rows.
 * 3. The worker's peak RSS during a 1,000-row, a 10,000-row and a 100,000-row import, beside the
 *    heap right after each full collection (what is really held): flat in the rows when the peak of
 *    100,000 rows is within 32 MB of the peak of 10,000.
 * 4. The platform's own ceiling: 20,000 rows against a simulator that answers at once (time scale
 *    0.0001: a median call takes half a millisecond) with no provider limits — the rows a second
 *    one worker process commits, with its CPU ms and PostgreSQL round trips a row; then two such
 *    imports at once on two worker processes, their rows a second in all.
 * 5. The ceiling's import again while retention passes prune a history of 3,000 finished imports
 *    (`--prune-jobs`; bench/finished-imports.ts) back to back from its first commit, then once more
 *    without: its rows committed a second while the passes ran against its rate without them
 *    (`import_makespan_while_pruning_ratio`, goal ≤ 1.1: the makespan of an import pruned beside all
 *    along). At the ceiling the import is bound by the worker's CPU and PostgreSQL, where a pass
 *    competes. `--only-pruning` runs this alone, between two runs of the ceiling.
 *
 * `--only-ceiling` runs item 4's single-process ceiling alone, three times; with
 * `BENCH_CPU_PROF_DIR` set, each worker child writes a V8 CPU profile there (`node --cpu-prof`;
 * summarise one with `npx tsx bench/cpu-top.ts <file>`).
 *
 * Timed runs at time scale 0.1, memory runs at 0.01 (`-- --scale`, `-- --memory-scale`). Beside the
 * figures it prints what explains them: rows a call, calls in flight, slot waits, reschedules
 * (attempts), commits in the busiest real second, the worker's CPU and event loop, the longest call.
 *
 * The environment is parsed once per process, so each measurement runs its worker in a child
 * (`node --import tsx bench/import.ts --child <label>`) with that measurement's environment. Every
 * import gets a budget no run comes near, so each is measured to its end; the makespan is then
 * compared with the default 600 s budget; an import that does not end within its cap (20 × its
 * ideal + 2 real minutes) ends the bench with a FAIL line and exit code 1. Runs in a database of
 * its own beside `DATABASE_URL`'s (`bounded_bench_import`, created with the project's migrations,
 * dropped at the end) and a Redis prefix of its own (removed at the end). Ends with one line:
 * `RESULT bench=import makespan_s=… ideal_s=… vs_ideal=… vs_serial=… provider_429=… exactly_once=yes|no …`.
 */
import { fork } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { PerformanceObserver, constants as perfConstants, performance } from "node:perf_hooks";
import v8 from "node:v8";
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import {
  BenchTimeout,
  benchDatabaseUrl,
  countClientCalls,
  benchRedisPrefix,
  csvOf,
  flagNumber,
  providerIdeal,
  startImportsWorker,
  untilJobEnds,
  withinCap,
  type ProviderIdeal,
} from "./common";
import { dropDatabase, migrate } from "../scripts/db/migrate";
import { finishedImports } from "./finished-imports";

/**
 * Production milliseconds × this = real milliseconds, for the timed runs: 10× faster, a median
 * call takes 550 ms. What a row costs the worker's CPU and the database (a few milliseconds) does
 * not shrink with the scale: at 0.01 it weighs 100× against the calls and the worker's CPU, not the
 * provider, sets the pace; at 0.1 it stays a small share, as in production. `-- --scale 0.01`
 * runs the same in a third of the time.
 */
const SCALE = flagNumber("--scale") ?? 0.1;
/**
 * The memory runs only need the rows to stream through: 100× faster, and the worker busier (more
 * garbage between collections), which is the harder case for a peak.
 */
const MEMORY_SCALE = flagNumber("--memory-scale") ?? 0.01;
const ROWS = 2_000;
/** Rows of the serial sample: ~100 calls of the production distribution, ~10 s at this scale. */
const SERIAL_SAMPLE = 100;
const MEMORY_ROWS = [1_000, 10_000, 100_000] as const;
/** The ceiling run: rows, time scale (calls answered at once) and provider limits that never bind. */
const INSTANT_ROWS = 20_000;
const INSTANT_SCALE = 0.0001;
const UNLIMITED = { concurrency: 10_000, rps: 100_000 };
/** The ceiling's goal: rows a second one worker process commits. */
const INSTANT_GOAL_ROWS_PER_S = 2_000;
/**
 * The history pruned while the ceiling's import runs again (`--prune-jobs`): finished imports of
 * PRUNE_ROWS rows, about 220 rows removed each; loading takes about 50 ms a job here.
 */
const PRUNE_JOBS = flagNumber("--prune-jobs") ?? 3_000;
const PRUNE_ROWS = 100;
/** Makespan while pruning ÷ without: the goal. */
const PRUNING_GOAL_RATIO = 1.1;
/** The provider's limits, for Bounded's limiter and the simulator alike. */
const CONCURRENCY = 32;
const RPS = 30;
/** The default budget of `imports` (lib/budgets: 600 s soft), the makespan's goal. */
const DEFAULT_SOFT_S = 600;
/**
 * Every run's budget (production seconds): far beyond any run here, so no import is cut short and
 * each makespan is measured to its last row (the serial loop and the 10,000 rows need far more
 * than 600 s).
 */
const BENCH_SOFT_S = 1_000_000;
const BENCH_HARD_S = 1_500_000;
/** How far over the 1,000-row run the 10,000-row run's peak RSS may go and still count as streamed. */
const RSS_GROWTH_GOAL_MB = 32;

const REPO = path.resolve(import.meta.dirname, "..");
const benchUrl = benchDatabaseUrl("bounded_bench_import");

/** What a worker child reports when it is told to stop. */
interface ChildReport {
  type: "report";
  baselineRssMb: number;
  peakRssMb: number;
  peakHeapMb: number;
  maxRssMb: number;
  /** CPU seconds (user + system, every thread) and the main event loop's busy share, from ready to stop. */
  cpuSeconds: number;
  eventLoopUtilization: number;
  /** Real seconds from ready to stop. */
  wallSeconds: number;
  /** The heap's used size right after each full (mark-compact) collection: what is really held. */
  peakLiveHeapMb: number;
  fullGcs: number;
  /** PostgreSQL round trips and Redis commands the worker made from ready to stop, every connection counted. */
  pgRoundTrips: number;
  redisCommands: number;
  /** At the peak RSS sample: the JS heap reserved, and memory outside it (buffers, WebAssembly, native). */
  atPeak: { heapTotalMb: number; externalMb: number };
}
type ChildMessage = { type: "ready" } | ChildReport;
type ParentMessage = { type: "stop" };

const MB = 1024 * 1024;

/**
 * A worker process: one BullMQ Worker on `imports`, as workers/main.ts starts it, until the parent
 * says stop; samples its own memory meanwhile.
 */
async function child(): Promise<void> {
  const send = (m: ChildMessage) => new Promise<void>((resolve) => process.send!(m, () => resolve()));
  // A worker outlives no bench: when the parent ends (a FAIL, a Ctrl-C), so does it.
  process.on("disconnect", () => process.exit(1));
  // Every PostgreSQL round trip and Redis command of the worker.
  const clientCalls = await countClientCalls();
  const worker = await startImportsWorker();

  // Sampled from before the import is enqueued until it is terminal: the modules are loaded by now,
  // so what grows is what the import holds.
  const baselineRss = process.memoryUsage.rss();
  let peakRss = baselineRss;
  let peakHeap = process.memoryUsage().heapUsed;
  let atPeak = { heapTotalMb: 0, externalMb: 0 };
  const sample = setInterval(() => {
    const m = process.memoryUsage();
    if (m.rss > peakRss) atPeak = { heapTotalMb: m.heapTotal / MB, externalMb: m.external / MB };
    peakRss = Math.max(peakRss, m.rss);
    peakHeap = Math.max(peakHeap, m.heapUsed);
  }, 20);
  // A heap peak between collections says how lazily V8 collects; the heap right after a full
  // collection says what the import holds. Observed, not forced, so the run is not disturbed.
  let peakLiveHeap = 0;
  let fullGcs = 0;
  const gcs = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if ((entry as unknown as { detail?: { kind?: number } }).detail?.kind !== perfConstants.NODE_PERFORMANCE_GC_MAJOR)
        continue;
      fullGcs += 1;
      peakLiveHeap = Math.max(peakLiveHeap, v8.getHeapStatistics().used_heap_size);
    }
  });
  gcs.observe({ entryTypes: ["gc"] });
  const stop = new Promise<void>((resolve) =>
    process.on("message", (m: ParentMessage) => m.type === "stop" && resolve()),
  );
  const cpu0 = process.cpuUsage();
  const elu0 = performance.eventLoopUtilization();
  const readyAt = performance.now();
  clientCalls.reset();
  await send({ type: "ready" });
  await stop;
  clearInterval(sample);
  gcs.disconnect();
  const cpu = process.cpuUsage(cpu0);
  const report: ChildReport = {
    type: "report",
    baselineRssMb: baselineRss / MB,
    peakRssMb: peakRss / MB,
    peakHeapMb: peakHeap / MB,
    // Kilobytes on Linux; includes start-up (module loading), so it is shown, not compared.
    maxRssMb: process.resourceUsage().maxRSS / 1024,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    eventLoopUtilization: performance.eventLoopUtilization(elu0).utilization,
    wallSeconds: (performance.now() - readyAt) / 1000,
    peakLiveHeapMb: peakLiveHeap / MB,
    fullGcs,
    pgRoundTrips: clientCalls.pg,
    redisCommands: clientCalls.redis,
    atPeak,
  };
  // The parent counts the ModelCall rows: every recording is written before the report.
  await worker.close();
  await send(report);
  process.exit(0);
}

/** One measured import: its row, its calls, the simulator's and the limiter's view, the worker's memory. */
interface Measured {
  label: string;
  jobId: string;
  rows: number;
  /** The run's time scale: production seconds = real ÷ scale. */
  scale: number;
  status: string;
  processed: number;
  failed: number;
  /** Job row created → finishedAt, real ms. */
  makespanMs: number;
  /** Job row created → attempt started, real ms (queue pick-up and the worker's start). */
  pickUpMs: number;
  calls: number;
  callsOk: number;
  meanCallMs: number;
  maxCallMs: number;
  sumCallMs: number;
  meanBatch: number;
  /** Last call's end → finishedAt, real ms. */
  tailAfterLastCallMs: number;
  sim: { admitted: number; rejected: number; rejectedConcurrency: number; rejectedRate: number };
  providerWaits: { waits: number; waitSeconds: number; gaveUp: number };
  transactions: number;
  duplicateRows: number;
  jobItems: number;
  itemsFailedRecorded: number;
  /** Real seconds from the first item's commit to the last one's. */
  commitSpanS: number;
  /** Items committed in the busiest real second: what the database did when nothing else held it back. */
  peakCommitsPerS: number;
  /** Attempts the import took, and how many times it gave its worker slot back to wait for the provider. */
  attempts: number;
  reschedules: number;
  memory: ChildReport;
}

async function main(): Promise<void> {
  const benchStarted = performance.now();
  const prefix = benchRedisPrefix("import");
  await dropDatabase(benchUrl);
  await migrate(benchUrl);
  // The bench's own environment, for this process and (inherited) for every worker child: set
  // before the modules that read it load.
  Object.assign(process.env, {
    DATABASE_URL: benchUrl,
    BOUNDED_REDIS_PREFIX: prefix,
    BOUNDED_TIME_SCALE: String(SCALE),
    LOG_LEVEL: "silent",
    BOUNDED_PROVIDER_MODEL_CONCURRENCY: String(CONCURRENCY),
    BOUNDED_PROVIDER_MODEL_RPS: String(RPS),
    BOUNDED_SIM_MODEL_CONCURRENCY: String(CONCURRENCY),
    BOUNDED_SIM_MODEL_RPS: String(RPS),
    BOUNDED_SIM_MODEL_ERROR_RATE: "0",
    BOUNDED_BUDGET_IMPORTS_SOFT_S: String(BENCH_SOFT_S),
    // Measured on direct calls: with this budget an import would otherwise take the batch lane.
    BOUNDED_BATCH_LANE_KINDS: "none",
    BOUNDED_BUDGET_IMPORTS_HARD_S: String(BENCH_HARD_S),
    // The largest memory run's file, above the default upload limit.
    BOUNDED_UPLOAD_MAX_ROWS: String(MEMORY_ROWS[2]),
  });
  delete process.env.BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT;
  const { KINDS } = await import("../lib/catalog/catalog");
  const workerHeapMb = (await import("../lib/env")).env().BOUNDED_WORKER_HEAP_MB;
  const { db, closeDb } = await import("../lib/db/client");
  const { createRedis, closeRedis, redis, scanKeys } = await import("../lib/redis/client");
  const { closeQueues } = await import("../lib/queues/queues");
  const { createImport } = await import("../lib/imports/create-import");
  const { providerWaitsKey } = await import("../lib/ratelimit/provider");
  const { startSimulators } = await import("../workers/simulators/server");
  const { pruneOnce } = await import("../lib/retention/prune");

  // A simulator per time scale: its latencies are scaled when it starts.
  type Simulators = Awaited<ReturnType<typeof startSimulators>>;
  const simulatorAt = (timeScale: number, limits = { concurrency: CONCURRENCY, rps: RPS }) =>
    startSimulators({ model: { errorRate: 0, timeScale, limits } });
  const sims = new Map<number, Simulators>([[SCALE, await simulatorAt(SCALE)]]);
  if (!sims.has(MEMORY_SCALE)) sims.set(MEMORY_SCALE, await simulatorAt(MEMORY_SCALE));
  sims.set(INSTANT_SCALE, await simulatorAt(INSTANT_SCALE, UNLIMITED));
  const simStats = async (sim: Simulators, method: "GET" | "DELETE") => {
    const res = await fetch(`${sim.url}/v1/_stats`, { method });
    return (await res.json()) as { admitted: number; rejected: { total: number; concurrency: number; rate: number } };
  };
  /**
   * Runs `run` while retention passes (`pruneOnce`, the classes job_detail and model_calls at their
   * default days, as the scheduled pass does) prune a history of PRUNE_JOBS finished imports loaded
   * first: from the import's first commit, one pass after the other until the history is gone or the
   * run ends — a worst case: a deployment runs one pass every BOUNDED_RETENTION_EVERY_S. A history
   * the passes would need the whole import to prune takes minutes to load, so what is compared is
   * the import's rate while they ran: the rows it committed inside the pruning window (its first to
   * its last commit within it) per second.
   */
  const whilePruning = async (run: (onCreated: (jobId: string) => void) => Promise<Measured>) => {
    // Without the imports' own Transactions: the tenant's results are not what the passes prune.
    const history = finishedImports(PRUNE_JOBS, PRUNE_ROWS, { transactions: false });
    const loadStarted = performance.now();
    for (const statement of history.load) await db().$executeRawUnsafe(statement);
    const loadS = (performance.now() - loadStarted) / 1000;
    let runEnded = false;
    let removed = 0;
    let passes = 0;
    let created!: (jobId: string | null) => void;
    const importCreated = new Promise<string | null>((resolve) => (created = resolve));
    const window = { from: 0, to: 0 };
    const pruner = (async () => {
      // From the import's first commit: its pick-up and projection are not what a pass competes with.
      const jobId = await importCreated;
      while (jobId && !runEnded) {
        const [first] = await db().$queryRaw<unknown[]>`SELECT 1 FROM "JobItem" WHERE "jobId" = ${jobId}::uuid LIMIT 1`;
        if (first) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      window.from = Date.now();
      while (!runEnded) {
        const pruned = await pruneOnce({ classes: ["job_detail", "model_calls"] });
        const n = pruned.reduce((sum, c) => sum + Object.values(c.removed).reduce((a, b) => a + b, 0), 0);
        removed += n;
        passes++;
        if (n === 0) break;
      }
      window.to = Date.now();
    })();
    const measured = await run(created).finally(() => {
      runEnded = true;
      created(null);
    });
    await pruner;
    const [inWindow] = await db().$queryRaw<{ rows: number; seconds: number | null }[]>`
      SELECT count(*)::int AS rows, extract(epoch FROM max("committedAt") - min("committedAt"))::float8 AS seconds
      FROM "JobItem" WHERE "jobId" = ${measured.jobId}::uuid
        AND "committedAt" BETWEEN (to_timestamp(${window.from / 1000}) AT TIME ZONE 'UTC') AND (to_timestamp(${window.to / 1000}) AT TIME ZONE 'UTC')`;
    const rowsPerS = inWindow?.seconds ? inWindow.rows / inWindow.seconds : 0;
    return {
      measured,
      removed,
      passes,
      loadS,
      windowS: (window.to - window.from) / 1000,
      rowsInWindow: inWindow?.rows ?? 0,
      rowsPerS,
    };
  };
  const itemsInFlight = KINDS.csv_import.itemConcurrency.n;
  const batchSize = KINDS.csv_import.modelBatch.size;

  /**
   * Starts a worker child with `env`, imports `rows` rows once it is ready, waits for the row to be
   * terminal — at most 20 × `ideal` + 2 real minutes, then the child is stopped and a
   * `BenchTimeout` says where the import was.
   */
  const measure = async (
    label: string,
    rows: number,
    scale: number,
    ideal: ProviderIdeal,
    env: Record<string, string>,
    /** Called with the job's id once the import is created (its makespan's start). */
    onCreated?: (jobId: string) => void,
  ): Promise<Measured> => {
    const sim = sims.get(scale)!;
    await simStats(sim, "DELETE");
    await redis().del(providerWaitsKey("model"));
    const worker = fork(import.meta.filename, ["--child", label], {
      cwd: REPO,
      // The heap limit the workers run with (scripts/start.ts): its memory is measured as it ships.
      execArgv: [
        "--import",
        import.meta.resolve("tsx"),
        `--max-old-space-size=${workerHeapMb}`,
        ...(process.env.BENCH_CPU_PROF_DIR ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROF_DIR}`] : []),
      ],
      env: { ...process.env, BOUNDED_TIME_SCALE: String(scale), MODEL_BASE_URL: sim.modelBaseUrl, ...env },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const messages: ChildMessage[] = [];
    const waiters: (() => void)[] = [];
    worker.on("message", (m: ChildMessage) => {
      messages.push(m);
      for (const w of waiters.splice(0)) w();
    });
    const exited = new Promise<number | null>((resolve) => worker.on("exit", resolve));
    const next = async <T extends ChildMessage["type"]>(type: T): Promise<Extract<ChildMessage, { type: T }>> => {
      for (;;) {
        const found = messages.find((m) => m.type === type);
        if (found) return found as Extract<ChildMessage, { type: T }>;
        const code = await Promise.race([exited, new Promise<"message">((r) => waiters.push(() => r("message")))]);
        if (code !== "message" && !messages.some((m) => m.type === type))
          throw new Error(`${label}: the worker process exited (${code}) before "${type}"`);
      }
    };
    await next("ready");

    const created = await createImport({
      tenant: `bench-import-${label}`,
      filename: `${label}.csv`,
      bytes: csvOf(rows),
    });
    if (created.type !== "created") {
      worker.kill();
      throw new Error(`${label}: the import was refused: ${created.message}`);
    }
    onCreated?.(created.jobId);
    const { jobId } = created;
    const capMs = 20 * ideal.seconds * 1000 * scale + 120_000;
    try {
      await withinCap(untilJobEnds(jobId, 200), capMs, `${label}: the ${rows}-row import`);
    } catch (err) {
      worker.kill();
      if (err instanceof BenchTimeout) {
        const row = await db().job.findUniqueOrThrow({
          where: { id: jobId },
          select: { status: true, processed: true, failed: true, message: true },
        });
        err.message += ` (20 × its ideal ${ideal.seconds.toFixed(1)} s at time scale ${scale} + 120 s): ${row.status}, ${row.processed + row.failed} of ${rows} rows, ${row.message ?? "no message"}`;
      }
      throw err;
    }
    worker.send({ type: "stop" } satisfies ParentMessage);
    const memory = await next("report");
    await exited;

    const job = await db().job.findUniqueOrThrow({
      where: { id: jobId },
      select: {
        status: true,
        processed: true,
        failed: true,
        createdAt: true,
        attemptStartedAt: true,
        finishedAt: true,
        attempt: true,
        reschedules: true,
      },
    });
    const [calls] = await db().$queryRaw<
      {
        calls: bigint;
        ok: bigint;
        mean: number | null;
        max: number | null;
        sum: bigint | null;
        batch: number | null;
        lastEnd: Date | null;
      }[]
    >`
      SELECT count(*) AS calls, count(*) FILTER (WHERE outcome = 'ok') AS ok, avg("durationMs")::float8 AS mean, max("durationMs") AS max,
             sum("durationMs") AS sum, avg("batchSize")::float8 AS batch,
             max("startedAt" + "durationMs" * interval '1 millisecond') AS "lastEnd"
      FROM "ModelCall" WHERE "jobId" = ${jobId}::uuid AND type = 'model'`;
    const [counts] = await db().$queryRaw<
      {
        transactions: bigint;
        duplicates: bigint;
        items: bigint;
        failures: bigint;
        span: number | null;
        peak: bigint | null;
      }[]
    >`
      SELECT (SELECT count(*) FROM "Transaction" WHERE "jobId" = ${jobId}::uuid) AS transactions,
             (SELECT count(*) FROM (SELECT row FROM "Transaction" WHERE "jobId" = ${jobId}::uuid GROUP BY row HAVING count(*) > 1) d) AS duplicates,
             (SELECT count(*) FROM "JobItem" WHERE "jobId" = ${jobId}::uuid) AS items,
             (SELECT count(*) FROM "JobItemFailure" WHERE "jobId" = ${jobId}::uuid) AS failures,
             (SELECT extract(epoch FROM max("committedAt") - min("committedAt"))::float8 FROM "JobItem" WHERE "jobId" = ${jobId}::uuid) AS span,
             (SELECT max(n) FROM (SELECT count(*) AS n FROM "JobItem" WHERE "jobId" = ${jobId}::uuid GROUP BY date_trunc('second', "committedAt")) s) AS peak`;
    const stats = await simStats(sim, "GET");
    const waits = await redis().hmget(providerWaitsKey("model"), "waits", "waitMs", "gaveUp");
    const finishedAt = job.finishedAt?.getTime() ?? Date.now();
    return {
      label,
      jobId,
      rows,
      scale,
      status: job.status,
      processed: job.processed,
      failed: job.failed,
      makespanMs: finishedAt - job.createdAt.getTime(),
      pickUpMs: (job.attemptStartedAt?.getTime() ?? finishedAt) - job.createdAt.getTime(),
      calls: Number(calls!.calls),
      callsOk: Number(calls!.ok),
      meanCallMs: calls!.mean ?? 0,
      maxCallMs: calls!.max ?? 0,
      sumCallMs: Number(calls!.sum ?? 0),
      meanBatch: calls!.batch ?? 0,
      tailAfterLastCallMs: calls!.lastEnd ? finishedAt - calls!.lastEnd.getTime() : 0,
      sim: {
        admitted: stats.admitted,
        rejected: stats.rejected.total,
        rejectedConcurrency: stats.rejected.concurrency,
        rejectedRate: stats.rejected.rate,
      },
      providerWaits: {
        waits: Number(waits[0] ?? 0),
        waitSeconds: Number(waits[1] ?? 0) / 1000,
        gaveUp: Number(waits[2] ?? 0),
      },
      transactions: Number(counts!.transactions),
      duplicateRows: Number(counts!.duplicates),
      jobItems: Number(counts!.items),
      itemsFailedRecorded: Number(counts!.failures),
      commitSpanS: counts!.span ?? 0,
      peakCommitsPerS: Number(counts!.peak ?? 0),
      attempts: job.attempt,
      reschedules: job.reschedules,
      memory,
    };
  };

  /** Every row processed exactly once: one Transaction per processed row, none twice, one JobItem per row. */
  const exactlyOnce = (m: Measured): string[] => {
    const problems: string[] = [];
    if (m.status !== "completed" && m.status !== "completed_with_errors") problems.push(`status ${m.status}`);
    if (m.processed + m.failed !== m.rows) problems.push(`processed ${m.processed} + failed ${m.failed} ≠ ${m.rows}`);
    if (m.transactions !== m.processed)
      problems.push(`${m.transactions} Transaction rows for ${m.processed} processed`);
    if (m.duplicateRows > 0) problems.push(`${m.duplicateRows} rows written twice`);
    if (m.jobItems !== m.rows) problems.push(`${m.jobItems} JobItem rows for ${m.rows} rows`);
    if (m.itemsFailedRecorded !== m.failed)
      problems.push(`${m.itemsFailedRecorded} failures recorded for ${m.failed} failed`);
    return problems;
  };

  const f0 = (n: number) => Math.round(n).toString();
  const f1 = (n: number) => n.toFixed(1);
  const f2 = (n: number) => n.toFixed(2);
  const prod = (realMs: number, scale = SCALE) => realMs / scale / 1000;
  // The ceiling: answered at once, with provider limits that never bind.
  const instantRun = async (label: string, onCreated?: (jobId: string) => void) =>
    measure(
      label,
      INSTANT_ROWS,
      INSTANT_SCALE,
      await providerIdeal({ rows: INSTANT_ROWS, batchSize, ...UNLIMITED }),
      {
        BOUNDED_PROVIDER_MODEL_CONCURRENCY: String(UNLIMITED.concurrency),
        BOUNDED_PROVIDER_MODEL_RPS: String(UNLIMITED.rps),
      },
      onCreated,
    );
  /** The bench's keys, database and servers. */
  const cleanUp = async () => {
    for (const sim of sims.values()) await sim.close();
    await closeQueues();
    const cleanup = createRedis("producer", { enableOfflineQueue: true });
    for await (const keys of scanKeys(cleanup, `${prefix}:*`, 1_000)) if (keys.length) await cleanup.del(...keys);
    await cleanup.quit();
    await closeRedis();
    await closeDb();
    await dropDatabase(benchUrl);
  };
  /**
   * Item 5's figures: the import's committed rows a second inside the pruning window against its
   * rate with no pass running (the mean of `before` and `after`, first commit to last), as a
   * makespan ratio (an import pruned beside from start to end would take rate without ÷ rate while).
   */
  const pruningFigures = (pruning: Awaited<ReturnType<typeof whilePruning>>, before: Measured, after: Measured) => {
    const rateOf = (m: Measured) => m.rows / Math.max(m.commitSpanS, 1e-3);
    const without = (rateOf(before) + rateOf(after)) / 2;
    const ratio = pruning.rowsPerS > 0 ? without / pruning.rowsPerS : Number.POSITIVE_INFINITY;
    const line =
      `the ceiling's ${INSTANT_ROWS}-row import while retention passes pruned ${PRUNE_JOBS} finished imports of ${PRUNE_ROWS} rows (loaded in ${f1(pruning.loadS)} s) back to back: ` +
      `${pruning.passes} passes removed ${pruning.removed} rows in ${f1(pruning.windowS)} s, during which the import committed ${pruning.rowsInWindow} rows, ${f0(pruning.rowsPerS)} a second, ` +
      `against ${f0(rateOf(before))} before and ${f0(rateOf(after))} after with no pass: ${f2(ratio)} × the makespan (goal ≤ ${PRUNING_GOAL_RATIO}); ` +
      `makespans ${f2(before.makespanMs / 1000)}, ${f2(pruning.measured.makespanMs / 1000)} (pruned beside for ${f0((100 * pruning.windowS * 1000) / pruning.measured.makespanMs)} % of it), ${f2(after.makespanMs / 1000)} s real`;
    const keys =
      `import_makespan_while_pruning_ratio=${f2(ratio)} target_import_makespan_while_pruning_ratio=${PRUNING_GOAL_RATIO} ` +
      `rows_per_s_while_pruning=${f0(pruning.rowsPerS)} rows_per_s_without_pruning=${f0(without)} pruning_window_s=${f1(pruning.windowS)} ` +
      `pruned_rows=${pruning.removed} prune_passes=${pruning.passes} prune_history_jobs=${PRUNE_JOBS}`;
    return { ratio, line, keys };
  };
  /** Item 5 alone (`--only-pruning`): the ceiling, the ceiling while pruning, the ceiling again. */
  const pruningOnly = async () => {
    const before = await instantRun("instant");
    const pruning = await whilePruning((onCreated) => instantRun("instant-pruning", onCreated));
    const after = await instantRun("instant-after");
    await cleanUp();
    const figures = pruningFigures(pruning, before, after);
    const problems = [before, pruning.measured, after].flatMap((m) => exactlyOnce(m).map((p) => `${m.label}: ${p}`));
    console.log(`${figures.line}; exactly once: ${problems.length === 0 ? "yes" : problems.join("; ")}`);
    console.log(
      `RESULT bench=import-pruning rows=${INSTANT_ROWS} ${figures.keys} ideal_ratio=1.00 ok=${figures.ratio <= PRUNING_GOAL_RATIO} ` +
        `exactly_once=${problems.length === 0 ? "yes" : "no"} load1=${os.loadavg()[0]!.toFixed(1)}`,
    );
  };
  if (process.argv.includes("--only-pruning")) return pruningOnly();
  /** Item 4 alone (`--only-ceiling`): the single-process ceiling, three times. */
  const ceilingOnly = async () => {
    const runs = [];
    for (const label of ["instant-1", "instant-2", "instant-3"]) runs.push(await instantRun(label));
    await cleanUp();
    const perS = runs.map((m) => m.rows / (m.makespanMs / 1000));
    const cpu = runs.map((m) => (1000 * m.memory.cpuSeconds) / m.rows);
    const pg = runs.map((m) => m.memory.pgRoundTrips / m.rows);
    const problems = runs.flatMap((m) => exactlyOnce(m).map((p) => `${m.label}: ${p}`));
    console.log(
      `the platform's ceiling, ${INSTANT_ROWS} rows answered at once, three runs: ${perS.map(f0).join(", ")} rows/s (goal ≥ ${INSTANT_GOAL_ROWS_PER_S}); ` +
        `${cpu.map(f2).join(", ")} ms of the worker's CPU and ${pg.map(f2).join(", ")} PostgreSQL round trips a row; exactly once: ${problems.length === 0 ? "yes" : problems.join("; ")}`,
    );
    console.log(
      `RESULT bench=import-ceiling rows=${INSTANT_ROWS} rows_per_s_instant=${perS.map(f0).join(",")} target_rows_per_s_instant=${INSTANT_GOAL_ROWS_PER_S} ` +
        `ok=${perS.every((r) => r >= INSTANT_GOAL_ROWS_PER_S)} instant_cpu_ms_per_row=${cpu.map(f2).join(",")} instant_pg_round_trips_per_row=${pg.map(f2).join(",")} ` +
        `exactly_once=${problems.length === 0 ? "yes" : "no"} load1=${os.loadavg()[0]!.toFixed(1)}`,
    );
  };
  if (process.argv.includes("--only-ceiling")) return ceilingOnly();

  console.log(
    `bench:import — time scale ${SCALE} for the timed runs, ${MEMORY_SCALE} for the memory runs (production seconds = real ÷ scale; every figure below is in production seconds unless it says real); ` +
      `provider limits ${CONCURRENCY} in flight, ${RPS} requests/s (Bounded's limiter and the simulator); simulator error rate 0`,
  );
  console.log(
    `runs: ${ROWS} rows with ${itemsInFlight} in flight and batches of ${batchSize}; serial loop (1 in flight) on a ${SERIAL_SAMPLE}-row sample, extrapolated linearly to ${ROWS}; worker memory at ${MEMORY_ROWS.join(", ")} rows; the ceiling on ${INSTANT_ROWS} rows answered at once`,
  );
  console.log(
    `every run's import budget raised to ${BENCH_SOFT_S} s soft / ${BENCH_HARD_S} s hard (BOUNDED_BUDGET_IMPORTS_SOFT_S / _HARD_S) so each is measured to its end; the goal compares the makespan with the default ${DEFAULT_SOFT_S} s`,
  );

  const limits = { concurrency: CONCURRENCY, rps: RPS };
  const ideal = await providerIdeal({ rows: ROWS, batchSize, ...limits });
  const concurrent = await measure("concurrent", ROWS, SCALE, ideal, {});
  // One row at a time, alone in its call: one call in flight.
  const serial = await measure(
    "serial",
    SERIAL_SAMPLE,
    SCALE,
    await providerIdeal({ rows: SERIAL_SAMPLE, batchSize: 1, concurrency: 1, rps: RPS }),
    { BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT: "1" },
  );
  // The memory runs: the same import at 1,000, 10,000 and 100,000 rows.
  const memoryRun = async (label: string, rows: number) =>
    measure(label, rows, MEMORY_SCALE, await providerIdeal({ rows, batchSize, ...limits }), {});
  const small = await memoryRun("memory-1k", MEMORY_ROWS[0]);
  const large = await memoryRun("memory-10k", MEMORY_ROWS[1]);
  const huge = await memoryRun("memory-100k", MEMORY_ROWS[2]);
  const instant = await instantRun("instant");
  // The same ceiling with two worker processes, one import each, at once: how it scales with processes here.
  const pair = await Promise.all(["instant-a", "instant-b"].map((label) => instantRun(label)));
  // The same ceiling while retention passes prune a history of finished imports back to back, then
  // once more without: the ratio is against the mean of the two runs without.
  const pruning = await whilePruning((onCreated) => instantRun("instant-pruning", onCreated));
  const instantAfter = await instantRun("instant-after");
  const runs = [concurrent, serial, small, large, huge, instant, ...pair, pruning.measured, instantAfter];

  await cleanUp();

  const makespanS = prod(concurrent.makespanMs);
  const idealS = ideal.seconds;
  const vsIdeal = makespanS / idealS;
  const serialS = (prod(serial.makespanMs) * ROWS) / SERIAL_SAMPLE;
  const vsSerial = serialS / makespanS;
  const provider429 = runs.reduce((n, m) => n + m.sim.rejected, 0);
  const broken = runs.map((m) => ({ m, problems: exactlyOnce(m) })).filter((r) => r.problems.length > 0);
  const rssGrowth = large.memory.peakRssMb - small.memory.peakRssMb;
  const rss100kOver10k = huge.memory.peakRssMb - large.memory.peakRssMb;
  const instantRowsPerS = instant.rows / (instant.makespanMs / 1000);
  const instantCpuMsPerRow = (1000 * instant.memory.cpuSeconds) / instant.rows;
  const instantPgPerRow = instant.memory.pgRoundTrips / instant.rows;
  const instantRedisPerCall = instant.memory.redisCommands / Math.max(1, instant.calls);
  // Both imports start within a moment of each other: their rows over the longer makespan.
  const pairRowsPerS = (2 * INSTANT_ROWS) / (Math.max(...pair.map((m) => m.makespanMs)) / 1000);
  const pruningFigured = pruningFigures(pruning, instant, instantAfter);

  const describe = (m: Measured) => {
    const ms = prod(m.makespanMs, m.scale);
    console.log(
      `  ${m.label} (time scale ${m.scale}): ${m.rows} rows, ${m.status}, ${m.processed} processed, ${m.failed} failed; makespan ${f1(ms)} s (${f2(m.makespanMs / 1000)} s real); ` +
        `${m.attempts} attempt${m.attempts === 1 ? "" : "s"}, ${m.reschedules} time${m.reschedules === 1 ? "" : "s"} rescheduled to wait for a provider slot`,
    );
    console.log(
      `    ${m.calls} model calls (${m.callsOk} ok, ${f2(m.meanBatch)} rows a call), mean ${f1(prod(m.meanCallMs, m.scale))} s, longest ${f1(prod(m.maxCallMs, m.scale))} s; ` +
        `calls in flight on average ${f1(m.sumCallMs / m.makespanMs)} of ${CONCURRENCY}; last attempt started ${f1(prod(m.pickUpMs, m.scale))} s after the row was created; last call's end → terminal ${f1(prod(m.tailAfterLastCallMs, m.scale))} s`,
    );
    console.log(
      `    simulator: ${m.sim.admitted} admitted, ${m.sim.rejected} answered 429 (${m.sim.rejectedConcurrency} concurrency, ${m.sim.rejectedRate} rate); ` +
        `provider limiter: ${m.providerWaits.waits} calls waited for a slot, ${f1(m.providerWaits.waitSeconds)} s in all, ${m.providerWaits.gaveUp} gave up`,
    );
    console.log(
      `    worker: ${f0(m.rows / Math.max(m.commitSpanS, 1e-3))} commits a real second (first to last), ${m.peakCommitsPerS} in the busiest; CPU ${f1(m.memory.cpuSeconds)} s in ${f1(m.memory.wallSeconds)} s (${f0((100 * m.memory.cpuSeconds) / m.memory.wallSeconds)} % of a core), event loop busy ${f0(100 * m.memory.eventLoopUtilization)} %, ${f2((1000 * m.memory.cpuSeconds) / m.rows)} ms CPU a row`,
    );
    console.log(
      `    worker RSS: ${f0(m.memory.baselineRssMb)} MB before the import, peak ${f0(m.memory.peakRssMb)} MB (then: heap reserved ${f0(m.memory.atPeak.heapTotalMb)} MB, outside the heap ${f0(m.memory.atPeak.externalMb)} MB); ` +
        `heap used peak ${f0(m.memory.peakHeapMb)} MB, right after a full collection at most ${f0(m.memory.peakLiveHeapMb)} MB (${m.memory.fullGcs} full collections); process maxRSS with start-up ${f0(m.memory.maxRssMb)} MB`,
    );
  };
  console.log("");
  for (const m of runs) describe(m);
  console.log("");
  console.log(`${ROWS} rows: makespan ${f1(makespanS)} s against the ideal ${f1(idealS)} s = ${f2(vsIdeal)} ×`);
  console.log(`  ${ideal.arithmetic}`);
  console.log(
    `  the run made ${concurrent.calls} calls (${f2(concurrent.calls / ideal.calls)} × the ${ideal.calls} of full batches), mean ${f2(prod(concurrent.meanCallMs))} s (full-batch mean ${f2(ideal.meanCallS)} s): ` +
      `its own calls alone needed max(${concurrent.calls} ÷ ${RPS}, ${concurrent.calls} × ${f2(prod(concurrent.meanCallMs))} s ÷ ${CONCURRENCY}) = ${f1(Math.max(concurrent.calls / RPS, (concurrent.calls * prod(concurrent.meanCallMs)) / CONCURRENCY))} s`,
  );
  // The busiest second is what the database managed when rows were ready to commit.
  const commitRate = Math.max(1, concurrent.peakCommitsPerS);
  const commitFloorS = prod((concurrent.rows / commitRate) * 1000);
  const longestS = prod(concurrent.maxCallMs);
  const floorS = Math.max(idealS, longestS, commitFloorS);
  console.log(
    `  ${f2(concurrent.meanBatch)} rows a call (batches of up to ${batchSize}), ${f1(concurrent.sumCallMs / concurrent.makespanMs)} of ${CONCURRENCY} calls in flight on average; ` +
      `rescheduled ${concurrent.reschedules} time${concurrent.reschedules === 1 ? "" : "s"} (each stops dispatching, waits for every row in flight, then waits in delayed and starts again)`,
  );
  console.log(
    `  longest single call ${f1(longestS)} s: no schedule finishes before it (the ideal counts only its share of the mean)`,
  );
  console.log(
    `  commits: at most ${f0(commitRate)} in a real second; at this time scale that alone takes ${f1(commitFloorS)} s for ${concurrent.rows} rows — ` +
      `the ideal needs ${f0(concurrent.rows / (idealS * SCALE))} a second here, ${f1(concurrent.rows / idealS)} a second at production speed`,
  );
  console.log(
    `  makespan ÷ max(ideal, longest call, commits alone) = ${f1(makespanS)} ÷ ${f1(floorS)} = ${f2(makespanS / floorS)}`,
  );
  console.log(
    `serial loop: ${SERIAL_SAMPLE} rows in ${f1(prod(serial.makespanMs))} s, × ${ROWS / SERIAL_SAMPLE} (extrapolated linearly) = ${f0(serialS)} s for ${ROWS} rows; serial ÷ concurrent = ${f2(vsSerial)}`,
  );
  console.log(
    `  of which model calls ${f1(prod(serial.sumCallMs))} s; the rest, ${f1(prod(serial.makespanMs - serial.sumCallMs) / SERIAL_SAMPLE)} s a row, is commit, linger and dispatch (real milliseconds, ÷ ${SCALE} like everything else)`,
  );
  console.log(`provider 429s (all runs): ${provider429}`);
  console.log(
    `exactly once: ${broken.length === 0 ? "every run's rows were each processed once (Transaction rows = processed, no row twice, one JobItem per row, processed + failed = rows)" : broken.map((b) => `${b.m.label}: ${b.problems.join("; ")}`).join(" | ")}`,
  );
  console.log(
    `worker peak RSS: ${f0(small.memory.peakRssMb)} MB at ${MEMORY_ROWS[0]} rows, ${f0(large.memory.peakRssMb)} MB at ${MEMORY_ROWS[1]} rows: ${rssGrowth >= 0 ? "+" : ""}${f1(rssGrowth)} MB; ${f0(huge.memory.peakRssMb)} MB at ${MEMORY_ROWS[2]} rows: ${rss100kOver10k >= 0 ? "+" : ""}${f1(rss100kOver10k)} MB over ${MEMORY_ROWS[1]} (goal ≤ ${RSS_GROWTH_GOAL_MB}), heap limit ${workerHeapMb} MB (BOUNDED_WORKER_HEAP_MB)`,
  );
  console.log(
    `the platform's ceiling: ${INSTANT_ROWS} rows with the model answering at once and no provider limits: ${f0(instantRowsPerS)} rows/s committed by one worker process (goal ≥ ${INSTANT_GOAL_ROWS_PER_S}), ${f2(instantCpuMsPerRow)} ms of its CPU and ${f2(instantPgPerRow)} PostgreSQL round trips a row; ${f1(instantRedisPerCall)} Redis commands a model call (${f2(instant.rows / Math.max(1, instant.calls))} rows a call)`,
  );
  console.log(
    `  with two worker processes, an import each, at once: ${f0(pairRowsPerS)} rows/s in all (${f2(pairRowsPerS / instantRowsPerS)} × one process; ${os.cpus().length} cores shared with PostgreSQL and the simulator)`,
  );
  console.log(`  ${pruningFigured.line}`);

  if (makespanS > DEFAULT_SOFT_S)
    console.log(`goal missed: ${ROWS} rows took ${f1(makespanS)} s, more than the default ${DEFAULT_SOFT_S} s budget`);
  if (vsIdeal > 1.25) console.log(`goal missed: ${f2(vsIdeal)} × the provider-bound ideal (goal ≤ 1.25)`);
  if (provider429 > 0) console.log(`goal missed: the simulator answered ${provider429} 429s (goal 0)`);
  // What stood between the makespan and the ideal, from the figures above.
  if (makespanS > DEFAULT_SOFT_S || vsIdeal > 1.25) {
    if (concurrent.reschedules > 0)
      console.log(
        `  why: rescheduled ${concurrent.reschedules} times for a provider slot wait; each one waits for every row in flight first (up to the longest call, ${f1(longestS)} s) and starts over`,
      );
    if (commitFloorS > 1.25 * idealS)
      console.log(
        `  why: commits do not shrink with the time scale: ${f1(commitFloorS)} s of commits at the busiest second's pace, against the ideal ${f1(idealS)} s`,
      );
    const cpuShare = concurrent.memory.cpuSeconds / concurrent.memory.wallSeconds;
    if (cpuShare > 0.8)
      console.log(
        `  why: the worker was busy ${f0(100 * cpuShare)} % of a core; its ${f2((1000 * concurrent.memory.cpuSeconds) / concurrent.rows)} ms of CPU a row do not shrink with the time scale (${f1(prod(concurrent.memory.cpuSeconds * 1000))} s here)`,
      );
    if (longestS > 1.25 * idealS)
      console.log(`  why: one call took ${f1(longestS)} s, and nothing can finish the import before it does`);
    if (concurrent.meanBatch < 0.75 * batchSize)
      console.log(
        `  why: batches left with ${f2(concurrent.meanBatch)} rows of ${batchSize}, so the import made ${f2((concurrent.calls * batchSize) / concurrent.rows)} × the calls a full batch needs`,
      );
  }
  if (rssGrowth > RSS_GROWTH_GOAL_MB) {
    const live = large.memory.peakLiveHeapMb - small.memory.peakLiveHeapMb;
    console.log(
      `goal missed: peak RSS grew ${f1(rssGrowth)} MB from ${MEMORY_ROWS[0]} to ${MEMORY_ROWS[1]} rows (goal ≤ ${RSS_GROWTH_GOAL_MB} MB); ` +
        `the heap right after a full collection grew ${f1(live)} MB (${f0(small.memory.peakLiveHeapMb)} → ${f0(large.memory.peakLiveHeapMb)} MB)${live <= RSS_GROWTH_GOAL_MB ? ": rows are not held, the rest is garbage V8 had not collected yet" : ""}`,
    );
  }
  console.log(
    `machine: ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")} (1 / 5 / 15 min); bench took ${f0((performance.now() - benchStarted) / 1000)} s`,
  );
  console.log(
    `RESULT bench=import rows=${ROWS} makespan_s=${f1(makespanS)} ideal_s=${f1(idealS)} vs_ideal=${f2(vsIdeal)} target_vs_ideal=1.25 ok=${vsIdeal <= 1.25} calls=${concurrent.calls} ideal_calls=${ideal.calls} serial_s=${f0(serialS)} vs_serial=${f2(vsSerial)} provider_429=${provider429} exactly_once=${broken.length === 0 ? "yes" : "no"} peak_rss_1k_mb=${f0(small.memory.peakRssMb)} peak_rss_10k_mb=${f0(large.memory.peakRssMb)} rss_growth_mb=${f1(rssGrowth)} target_rss_growth_mb=${RSS_GROWTH_GOAL_MB} peak_rss_100k_mb=${f0(huge.memory.peakRssMb)} rss_100k_over_10k_mb=${f1(rss100kOver10k)} rows_per_s_instant=${f0(instantRowsPerS)} target_rows_per_s_instant=${INSTANT_GOAL_ROWS_PER_S} instant_cpu_ms_per_row=${f2(instantCpuMsPerRow)} instant_pg_round_trips_per_row=${f2(instantPgPerRow)} instant_redis_commands_per_call=${f1(instantRedisPerCall)} rows_per_s_instant_2_workers=${f0(pairRowsPerS)} ${pruningFigured.keys} worker_heap_mb=${workerHeapMb} load1=${os.loadavg()[0]!.toFixed(1)}`,
  );
  if (broken.length > 0) process.exit(1);
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
      console.error(`FAIL bench=import: ${err instanceof Error ? err.message : String(err)}`);
      await dropDatabase(benchUrl).catch(() => undefined);
      process.exit(1);
    },
  );
}
