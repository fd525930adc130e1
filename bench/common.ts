/**
 * What the benchmarks share: their flags, a database and a Redis prefix of their own beside the
 * configured ones, a bounded wait, the provider-bound ideal of an import from the run's
 * parameters, the bank-export CSV they upload, and the worker process they measure.
 */
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import { parseEnv } from "../lib/env";
import { distinctWord } from "../lib/format/distinct-word";

/** `--scale 0.05` → 0.05; undefined without the flag (or with a value that is not a positive number). */
export function flagNumber(name: string): number | undefined {
  const i = process.argv.indexOf(name);
  const value = i >= 0 ? Number(process.argv[i + 1]) : NaN;
  return Number.isFinite(value) && value > 0 ? value : undefined;
}

/** The configured `DATABASE_URL` with another database name: the bench's own, created and dropped by it. */
export function benchDatabaseUrl(database: string): string {
  const url = new URL(parseEnv(process.env).DATABASE_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

/**
 * The configured `BOUNDED_REDIS_PREFIX` with the bench's name and this process's id: keys of its
 * own, which the bench removes at its end (a hash tag stays the prefix's start on a Redis Cluster).
 */
export function benchRedisPrefix(bench: string): string {
  return `${parseEnv(process.env).BOUNDED_REDIS_PREFIX}-bench-${bench}-${process.pid}`;
}

/** What a bench waited for did not end within its cap: the bench reports it and ends. */
export class BenchTimeout extends Error {
  override name = "BenchTimeout";
}

/**
 * `promise`, or a `BenchTimeout` naming `what` once `capMs` real milliseconds pass: a bench never
 * waits for ever on a job, a process or a reply that does not come.
 */
export async function withinCap<T>(promise: Promise<T>, capMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const cap = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new BenchTimeout(`${what} did not end within ${(capMs / 1000).toFixed(0)} s (real)`)),
      capMs,
    );
  });
  try {
    return await Promise.race([promise, cap]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The simulator's mean single-row model call, production ms, from its latency distribution: the
 * lognormal body's mean (median × e^(σ²/2); its cap is 120 medians out, too far to count) and the
 * uniform tail's (its midpoint), weighted by their shares.
 */
async function meanModelCallMs(): Promise<{ ms: number; arithmetic: string }> {
  // Loaded when asked: the simulator's modules read the environment, which the bench sets first.
  const { MODEL_LATENCY } = await import("../workers/simulators/model");
  const { medianMs, sigma, tailShare, tailFromMs, maxMs } = MODEL_LATENCY;
  const bodyMs = medianMs * Math.exp((sigma * sigma) / 2);
  const tailMs = (tailFromMs + maxMs) / 2;
  const ms = (1 - tailShare) * bodyMs + tailShare * tailMs;
  const s = (x: number) => (x / 1000).toFixed(2);
  return {
    ms,
    arithmetic: `${1 - tailShare} × ${s(medianMs)} s × e^(${sigma}²/2) + ${tailShare} × (${s(tailFromMs)} + ${s(maxMs)}) s ÷ 2 = ${s(ms)} s`,
  };
}

/** An import's run parameters: what the provider-bound ideal is computed from. */
export interface ImportParameters {
  rows: number;
  /** Rows a model call takes (the kind's batch size). */
  batchSize: number;
  /** The provider's calls in flight and requests a second. */
  concurrency: number;
  rps: number;
}

/** The fastest the provider lets `rows` rows through, production seconds, with its arithmetic. */
export interface ProviderIdeal {
  calls: number;
  meanCallS: number;
  byRateS: number;
  byConcurrencyS: number;
  seconds: number;
  /** The whole computation, figures included, to print beside the ideal. */
  arithmetic: string;
}

/**
 * The provider-bound ideal of an import from its parameters, never from what the run did: full
 * batches (⌈rows ÷ batch⌉ calls), each taking the simulator's mean call × its batch factor; the
 * calls go through at most R a second and C at a time, so the ideal is
 * `max(calls ÷ R, calls × mean call ÷ C)`. A run that leaves batches half full makes more calls
 * than this counts: that shows as a ratio above 1, not as a larger yardstick.
 */
export async function providerIdeal(p: ImportParameters): Promise<ProviderIdeal> {
  const { batchLatencyFactor } = await import("../workers/simulators/model");
  const single = await meanModelCallMs();
  const calls = Math.ceil(p.rows / p.batchSize);
  const factor = batchLatencyFactor(p.batchSize);
  const meanCallS = (single.ms * factor) / 1000;
  const byRateS = calls / p.rps;
  const byConcurrencyS = (calls * meanCallS) / p.concurrency;
  const seconds = Math.max(byRateS, byConcurrencyS);
  const f1 = (x: number) => x.toFixed(1);
  const f2 = (x: number) => x.toFixed(2);
  const arithmetic =
    `ideal = max(calls ÷ R, calls × mean call ÷ C) = max(${calls} ÷ ${p.rps} = ${f1(byRateS)} s, ${calls} × ${f2(meanCallS)} s ÷ ${p.concurrency} = ${f1(byConcurrencyS)} s) = ${f1(seconds)} s; ` +
    `calls = ⌈${p.rows} rows ÷ ${p.batchSize} a batch⌉ = ${calls} (full batches); mean call = mean single-row call × batch factor = ${f2(single.ms / 1000)} s × ${f2(factor)} = ${f2(meanCallS)} s ` +
    `(single-row mean ${single.arithmetic}; batch factor 1 + 0.1 × (${p.batchSize} − 1))`;
  return { calls, meanCallS, byRateS, byConcurrencyS, seconds, arithmetic };
}

/** Counterparties the simulated model knows, and some it does not. */
const COUNTERPARTIES = [
  "REWE Markt",
  "Deutsche Bahn",
  "Netflix",
  "Stadtwerke Berlin",
  "Amazon EU",
  "Hausverwaltung Miete",
  "Pizzeria Napoli",
  "Apotheke am Markt",
  "Lufthansa",
  "Kiosk 24",
];

/** A bank export of `rows` rows (every one valid, each a question of its own), numbered from `first`, as `createImport` takes an upload. */
export function csvOf(rows: number, first = 1): Uint8Array {
  const lines = ["date,amount,currency,counterparty,description"];
  for (let i = first; i < first + rows; i++) {
    const date = `2026-${String((i % 12) + 1).padStart(2, "0")}-${String((i % 28) + 1).padStart(2, "0")}`;
    lines.push(
      `${date},-${(i % 400) + 1}.${String(i % 100).padStart(2, "0")},EUR,${COUNTERPARTIES[i % COUNTERPARTIES.length]},card payment ${distinctWord(i)}`,
    );
  }
  return new TextEncoder().encode(lines.join("\n"));
}

/**
 * Resolves once the job has ended (any status that is not open), polling its row every `pollMs`:
 * the makespan is read off the row (`finishedAt`), and polling slowly keeps the database for the
 * worker. Loads the database client when called, once the bench's environment is set.
 */
export async function untilJobEnds(jobId: string, pollMs = 250): Promise<void> {
  const { db } = await import("../lib/db/client");
  const { OPEN_STATUSES } = await import("../lib/core/job-statuses");
  for (;;) {
    const row = await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { status: true } });
    if (!(OPEN_STATUSES as readonly string[]).includes(row.status)) return;
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/**
 * In a bench's worker child: one BullMQ Worker on `imports`, as workers/main.ts starts it (the
 * catalog's processors, its lock and reschedule settings). Loaded once the child's environment is
 * set. `close` stops it and writes every model-call record before it resolves, so the parent reads
 * them all.
 */
export async function startImportsWorker(): Promise<{ concurrency: number; close(): Promise<void> }> {
  const { Worker } = await import("bullmq");
  const { env } = await import("../lib/env");
  const { closeDb } = await import("../lib/db/client");
  const { createRedis, closeRedis } = await import("../lib/redis/client");
  const { closeQueues } = await import("../lib/queues/queues");
  const { logger } = await import("../lib/log");
  const { scaled } = await import("../lib/time");
  const { flushModelCallRecords } = await import("../lib/modelcalls/record");
  const { PROCESSORS } = await import("../workers/catalog");
  const { queueProcessor } = await import("../workers/queue-processor");
  const { rescheduleWorkerOptions } = await import("../lib/runs/reschedule");

  const e = env();
  const connection = createRedis("worker");
  const shutdown = new AbortController();
  // As workers/main.ts sets them.
  const lockDuration = Math.max(scaled(30_000), 5_000);
  const worker = new Worker(
    "imports",
    queueProcessor("imports", { processors: PROCESSORS, shutdown: shutdown.signal, log: logger("bench") }),
    {
      connection,
      prefix: e.BOUNDED_REDIS_PREFIX,
      concurrency: e.BOUNDED_WORKER_CONCURRENCY,
      lockDuration,
      stalledInterval: lockDuration,
      ...rescheduleWorkerOptions("imports"),
    },
  );
  worker.on("error", (err) => console.error(`worker error: ${err.message}`));
  await worker.waitUntilReady();
  return {
    concurrency: e.BOUNDED_WORKER_CONCURRENCY,
    async close() {
      await worker.close();
      await connection.quit();
      await flushModelCallRecords();
      await closeQueues();
      await closeRedis();
      await closeDb();
    },
  };
}

/** What `countClientCalls` counts: PostgreSQL round trips and Redis commands since the last reset. */
export interface ClientCalls {
  pg: number;
  redis: number;
  reset(): void;
  /** Puts the clients back as they were. */
  restore(): void;
}

/**
 * Counts every PostgreSQL round trip (`pg`'s `Client.query`, which Prisma's adapter and plain pg
 * both go through) and every Redis command (`ioredis`'s `sendCommand`, BullMQ's connections and
 * Bounded's alike) this process makes, on every connection.
 */
export async function countClientCalls(): Promise<ClientCalls> {
  const pgProto = (await import("pg")).default.Client.prototype as unknown as {
    query: (...args: unknown[]) => unknown;
  };
  const redisProto = (await import("ioredis")).Redis.prototype as unknown as {
    sendCommand: (...args: unknown[]) => unknown;
  };
  const realQuery = pgProto.query;
  const realSend = redisProto.sendCommand;
  const calls: ClientCalls = {
    pg: 0,
    redis: 0,
    reset() {
      calls.pg = 0;
      calls.redis = 0;
    },
    restore() {
      pgProto.query = realQuery;
      redisProto.sendCommand = realSend;
    },
  };
  pgProto.query = function (this: unknown, ...args: unknown[]) {
    calls.pg++;
    return realQuery.apply(this, args);
  };
  redisProto.sendCommand = function (this: unknown, ...args: unknown[]) {
    calls.redis++;
    return realSend.apply(this, args);
  };
  return calls;
}
