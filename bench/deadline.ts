/**
 * npm run bench:deadline — how late does a job become terminal after its soft deadline?
 *
 * Runs 60 jobs (10 at a time) through the real runtime against the real PostgreSQL, each stuck
 * in work that never ends (it waits for its signal), with a 300 ms soft budget (real time). Not a
 * model call to a service that never answers: a deadline that falls while a service is silent is
 * an outage, which the run waits out instead of timing out (workers/deadline-outage.integration.test.ts).
 * Measures `finishedAt − (attemptStartedAt + soft budget)` per job against the ideal, 0 ms (the
 * row terminal the moment its soft budget ends), and as a baseline from the same run the lateness
 * of a bare timer of the same length on this machine. Target: p99 ≤ 100 ms. A batch of jobs that
 * does not end within its cap is reported and the bench ends with exit code 1.
 *
 * Runs in a database of its own beside `DATABASE_URL`'s (`bounded_bench_deadline`, created with
 * the project's migrations, dropped at the end) and a Redis prefix of its own (removed at the
 * end). Ends with one line:
 * `RESULT bench=deadline p50_ms=… p99_ms=… timer_p99_ms=… ratio_p99_to_timer=… ideal_ms=0 …`.
 */
import os from "node:os";
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import { benchDatabaseUrl, benchRedisPrefix, withinCap } from "./common";
import { dropDatabase, migrate } from "../scripts/db/migrate";

const benchUrl = benchDatabaseUrl("bounded_bench_deadline");
const prefix = benchRedisPrefix("deadline");
const JOBS = 60;
const PARALLEL = 10;
const SCALE = 0.001;
const SOFT_MS = 300_000; // production ms → 300 ms real
/** Real ms a batch of jobs may take: each ends by its hard budget (600 ms real), so only a run that never settles reaches it. */
const BATCH_CAP_MS = 30_000;

// A fresh database each run (a run that crashed may have left one behind).
await dropDatabase(benchUrl);
await migrate(benchUrl);

// A benchmark's own environment: set before any module reads it.
Object.assign(process.env, {
  DATABASE_URL: benchUrl,
  BOUNDED_REDIS_PREFIX: prefix,
  BOUNDED_TIME_SCALE: String(SCALE),
  LOG_LEVEL: "silent",
});
const { db, closeDb } = await import("../lib/db/client");
const { closeRedis, redis, scanKeys } = await import("../lib/redis/client");
const { runJob } = await import("../lib/runs/run-job");
const { logger } = await import("../lib/log");
const { makeJob, queueJobFor } = await import("../test/helpers/jobs");

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
  const jobs = Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      const { id } = await makeJob("bench-deadline", { total: 1, softMs: SOFT_MS, hardMs: SOFT_MS * 2 });
      await runJob(
        {
          // Work that never ends by itself: it stops when its deadline aborts it.
          csv_import: ({ signal }) =>
            new Promise<void>((_, reject) =>
              signal.addEventListener("abort", () => reject(signal.reason), { once: true }),
            ),
        },
        queueJobFor(id),
        new AbortController().signal,
        log,
      ).catch(() => undefined);
      const row = await db().job.findUniqueOrThrow({
        where: { id },
        select: { status: true, message: true, attemptStartedAt: true, finishedAt: true },
      });
      if (row.status !== "timed_out") throw new Error(`job ${id} ended ${row.status}: ${row.message ?? "no message"}`);
      lateness.push(row.finishedAt!.getTime() - (row.attemptStartedAt!.getTime() + SOFT_MS * SCALE));
    }),
  );
  await withinCap(jobs, BATCH_CAP_MS, `batch ${batch + 1} of ${PARALLEL} jobs`).catch(async (err: unknown) => {
    console.error(`FAIL bench=deadline: ${err instanceof Error ? err.message : String(err)}`);
    await dropDatabase(benchUrl).catch(() => undefined);
    process.exit(1);
  });
}
await closeDb();
for await (const keys of scanKeys(redis(), `${prefix}:*`, 1_000)) if (keys.length) await redis().del(...keys);
await closeRedis();
await dropDatabase(benchUrl);

const fmt = (n: number) => n.toFixed(1);
const p50 = percentile(lateness, 50);
const p99 = percentile(lateness, 99);
const t99 = percentile(timerLateness, 99);
console.log(`jobs=${lateness.length}, ${PARALLEL} at a time, every one timed_out`);
console.log(
  `ideal = 0 ms late: the row terminal at attemptStartedAt + soft budget = + ${SOFT_MS} production ms × ${SCALE} = + ${SOFT_MS * SCALE} ms real`,
);
console.log(
  `row terminal − soft deadline: p50 ${fmt(p50)} ms, p99 ${fmt(p99)} ms, max ${fmt(Math.max(...lateness))} ms (target p99 ≤ 100 ms: ${p99 <= 100 ? "PASS" : "MISS"})`,
);
console.log(
  `baseline, a bare ${SOFT_MS * SCALE} ms timer's lateness (same concurrency): p50 ${fmt(percentile(timerLateness, 50))} ms, p99 ${fmt(t99)} ms`,
);
console.log(
  `machine: ${os.cpus().length} cores, load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(" / ")} (1 / 5 / 15 min)`,
);
console.log(
  `RESULT bench=deadline jobs=${lateness.length} ideal_ms=0 p50_ms=${fmt(p50)} p99_ms=${fmt(p99)} timer_p99_ms=${fmt(t99)} ratio_p99_to_timer=${(p99 / Math.max(t99, 0.1)).toFixed(2)} target_p99_ms=100 ok=${p99 <= 100} load1=${os.loadavg()[0]!.toFixed(1)}`,
);
process.exit(0);
