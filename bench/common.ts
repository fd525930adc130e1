/**
 * What the import-driven benchmarks (bench/import.ts, bench/fairness.ts) share: their flags, a
 * database of their own beside the configured one, the bank-export CSV they upload, and the
 * worker process they measure.
 */
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import { parseEnv } from "../lib/env";

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

/** Counterparties the simulated model knows, and some it does not. */
const COUNTERPARTIES = ["REWE Markt", "Deutsche Bahn", "Netflix", "Stadtwerke Berlin", "Amazon EU", "Hausverwaltung Miete", "Pizzeria Napoli", "Apotheke am Markt", "Lufthansa", "Kiosk 24"];

/** A bank export of `rows` rows (every one valid), as `createImport` takes an upload. */
export function csvOf(rows: number): Uint8Array {
  const lines = ["date,amount,currency,counterparty,description"];
  for (let i = 1; i <= rows; i++) {
    const date = `2026-${String((i % 12) + 1).padStart(2, "0")}-${String((i % 28) + 1).padStart(2, "0")}`;
    lines.push(`${date},-${(i % 400) + 1}.${String(i % 100).padStart(2, "0")},EUR,${COUNTERPARTIES[i % COUNTERPARTIES.length]},card payment ${i}`);
  }
  return new TextEncoder().encode(lines.join("\n"));
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
  const { rescheduleWorkerOptions } = await import("../workers/reschedule");

  const e = env();
  const connection = createRedis("worker");
  const shutdown = new AbortController();
  // As workers/main.ts sets them.
  const lockDuration = Math.max(scaled(30_000), 5_000);
  const worker = new Worker("imports", queueProcessor("imports", { processors: PROCESSORS, shutdown: shutdown.signal, log: logger("bench") }), {
    connection,
    prefix: e.BOUNDED_REDIS_PREFIX,
    concurrency: e.BOUNDED_WORKER_CONCURRENCY,
    lockDuration,
    stalledInterval: lockDuration,
    ...rescheduleWorkerOptions("imports"),
  });
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
