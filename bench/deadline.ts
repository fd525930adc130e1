/**
 * npm run bench:deadline — how late does a job become terminal after its soft deadline?
 *
 * Runs 60 jobs (10 at a time) through the real runtime against the real PostgreSQL, each stuck
 * in a model call to an endpoint that never answers, with a 300 ms soft budget (real time).
 * Measures `finishedAt − (attemptStartedAt + soft budget)` per job, and as a baseline from the
 * same run the lateness of a bare timer on this machine. Target: p99 ≤ 100 ms.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";

const DATABASE = "bounded_bench_deadline";
const url = `postgresql://postgres@127.0.0.1:5432/${DATABASE}`;
const JOBS = 60;
const PARALLEL = 10;
const SCALE = 0.001;
const SOFT_MS = 300_000; // production ms → 300 ms real

const hang = http.createServer(() => undefined);
await new Promise<void>((resolve) => hang.listen(0, "127.0.0.1", resolve));
const hangUrl = `http://127.0.0.1:${(hang.address() as AddressInfo).port}`;

// A fresh database each run (a run that crashed may have left one behind).
const admin = new pg.Client({ connectionString: "postgresql://postgres@127.0.0.1:5432/postgres" });
await admin.connect();
await admin.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);

// A benchmark's own environment: set before any module reads it.
Object.assign(process.env, { DATABASE_URL: url, BOUNDED_TIME_SCALE: String(SCALE), LOG_LEVEL: "silent", MODEL_BASE_URL: hangUrl });
const { migrate } = await import("../scripts/db/migrate");
await migrate(url);
const { db, closeDb } = await import("@/lib/db/client");
const { runJob } = await import("@/workers/runtime");
const { chatCompletion } = await import("@/lib/modelcalls/chat-completion");
const { flushModelCallRecords } = await import("@/lib/modelcalls/record");
const { logger } = await import("@/lib/log");
const { makeJob, queueJobFor } = await import("@/test/helpers/jobs");

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

// Baseline: how late a plain 300 ms timer fires here, under the same concurrency.
const timerLateness: number[] = [];
for (let batch = 0; batch < JOBS / PARALLEL; batch++) {
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      const start = performance.now();
      await new Promise((r) => setTimeout(r, SOFT_MS * SCALE));
      timerLateness.push(performance.now() - start - SOFT_MS * SCALE);
    }),
  );
}

const log = logger("bench");
const lateness: number[] = [];
for (let batch = 0; batch < JOBS / PARALLEL; batch++) {
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      const { id } = await makeJob("bench-deadline", { total: 1, softMs: SOFT_MS, hardMs: SOFT_MS * 2 });
      await runJob(
        {
          csv_import: async ({ signal, run }) => {
            await chatCompletion({ messages: [{ role: "user", content: "wait" }], signal, context: { queue: run.queue, jobKind: run.kind, jobId: run.jobId } });
          },
        },
        queueJobFor(id),
        new AbortController().signal,
        log,
      ).catch(() => undefined);
      const row = await db().job.findUniqueOrThrow({ where: { id }, select: { status: true, attemptStartedAt: true, finishedAt: true } });
      if (row.status !== "timed_out") throw new Error(`job ${id} ended ${row.status}`);
      lateness.push(row.finishedAt!.getTime() - (row.attemptStartedAt!.getTime() + SOFT_MS * SCALE));
    }),
  );
}
await flushModelCallRecords();
const aborted = await db().modelCall.count({ where: { outcome: "aborted" } });
await closeDb();
hang.closeAllConnections();
hang.close();
await admin.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
await admin.end();

const fmt = (n: number) => n.toFixed(1);
const p50 = percentile(lateness, 50);
const p99 = percentile(lateness, 99);
const t99 = percentile(timerLateness, 99);
console.log(`jobs=${lateness.length} (in-flight model calls aborted: ${aborted})`);
console.log(`row terminal − soft deadline: p50 ${fmt(p50)} ms, p99 ${fmt(p99)} ms, max ${fmt(Math.max(...lateness))} ms (target p99 ≤ 100 ms)`);
console.log(`baseline, bare timer lateness: p50 ${fmt(percentile(timerLateness, 50))} ms, p99 ${fmt(t99)} ms`);
console.log(`RESULT bench=deadline jobs=${lateness.length} p50_ms=${fmt(p50)} p99_ms=${fmt(p99)} timer_p99_ms=${fmt(t99)} ratio_p99_to_timer=${(p99 / Math.max(t99, 0.1)).toFixed(2)} target_p99_ms=100 ok=${p99 <= 100}`);
process.exit(0);
