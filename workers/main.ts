import { hostname } from "node:os";
import { Worker } from "bullmq";
import { validateBudgets } from "@/lib/budgets/budgets";
import { validateReservationPolicy } from "@/lib/quota/settings";
import { startBudgetPublisher } from "@/lib/budgets/runtime";
import { listenForCategoryChanges } from "@/lib/categories/cache";
import { startOverdueSweepSchedule } from "@/lib/invoices/schedule";
import { closeDb } from "@/lib/db/client";
import { DependencyPause, whileUnavailable } from "@/lib/dependencies/pause";
import { env } from "@/lib/env";
import { MAX_CRASH_RESUMES } from "@/lib/runs/crash-resume";
import { WorkerShutdown } from "@/lib/core/signals";
import { logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { startMetricsPublisher } from "@/lib/reports/metrics-publish";
import { flushModelCallRecords } from "@/lib/modelcalls/record";
import { flushProjections } from "@/lib/runs/projection-writes";
import { wakeWaitersOnRecovery } from "@/lib/runs/outage-waits";
import { closeQueues } from "@/lib/queues/queues";
import { closeRedis, createRedis, key } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import { startTracing } from "@/lib/tracing/tracing";
import { PROCESSORS } from "./catalog";
import { queueProcessor } from "./queue-processor";
import { rescheduleWorkerOptions } from "@/lib/runs/reschedule";
import { startReaper } from "./schedulers/reaper";
import { startAnswersPruner } from "./schedulers/answers-pruner";
import { startReserveSweeper } from "./schedulers/sweeper";
import { startWatchdog } from "@/lib/runs/watchdog";
import { startWebhookDelivery } from "./webhooks/worker";
import { closeWebhookQueue } from "@/lib/webhooks/queue";

const log = logger("workers");

/** How long a stopping worker lets running jobs finish before it hands them back to the queue. */
const SHUTDOWN_GRACE_MS = 10_000;
const PRESENCE_MS = 5_000;

async function main() {
  // A stop asked for while the process is still starting (a deploy, Ctrl-C) is kept and carried
  // out once there is something to stop in order, instead of Node's default of dying on the spot.
  // A start-up that hangs (a service that does not answer) is not waited for past 10 s.
  let stopAsked: string | undefined;
  let startupGiveUp: NodeJS.Timeout | undefined;
  let onStopSignal = (signal: string) => {
    stopAsked ??= signal;
    startupGiveUp ??= setTimeout(() => {
      log.warn({ signal }, "stopped while still starting");
      process.exit(1);
    }, 10_000);
  };
  process.on("SIGTERM", () => onStopSignal("SIGTERM"));
  process.on("SIGINT", () => onStopSignal("SIGINT"));
  const e = env();
  // A budget that cannot work (hard ≤ soft) stops start-up with one line naming the variables.
  validateBudgets(e);
  // A sweep window shorter than the worst case of a generation × margin would take reserves of
  // generations that can still finish: refuse to start, naming both numbers.
  validateReservationPolicy(e);
  if (e.BOUNDED_TIME_SCALE !== 1)
    log.warn(
      { timeScale: e.BOUNDED_TIME_SCALE },
      `BOUNDED_TIME_SCALE=${e.BOUNDED_TIME_SCALE}: every duration is scaled`,
    );
  const connection = createRedis("worker");
  const shutdown = new AbortController();
  const watchdog = startWatchdog();
  // A worker (re)started while PostgreSQL is down waits for it instead of exiting.
  const stopListening = await whileUnavailable(
    () => listenForCategoryChanges(),
    new DependencyPause(shutdown.signal, log),
  );
  // A lost lock is how BullMQ notices a dead worker; scaled like everything else, but never so
  // short that an ordinary pause of the event loop looks like a death.
  const lockDuration = Math.max(scaled(30_000), 5_000);
  // Spans of job runs and their outbound calls, when OTEL_EXPORTER_OTLP_ENDPOINT is set.
  const stopTracing = await startTracing();
  // Every process checks for stalled jobs twice per lock duration: a killed worker's jobs go back
  // to the queue within about 1.5 lock durations of its death (its lock lapses, the next check
  // moves them), well inside any job's hard limit, so a live worker resumes them at their cursor
  // before the reaper would have to.
  const stalledInterval = Math.max(Math.round(lockDuration / 2), 1_000);

  // The queues of this process (BOUNDED_WORKER_QUEUES, default all): a pool of processes of its own
  // for big imports, say. Its presence names them, so readiness and the queues page see which
  // queue has a live worker.
  const queues = e.BOUNDED_WORKER_QUEUES;
  const workers = queues.map(
    (queueName) =>
      new Worker(
        queueName,
        queueProcessor(queueName, { processors: PROCESSORS, shutdown: shutdown.signal, log, watch: watchdog }),
        {
          connection,
          prefix: e.BOUNDED_REDIS_PREFIX,
          concurrency: e.BOUNDED_WORKER_CONCURRENCY,
          lockDuration,
          stalledInterval,
          // BullMQ's default (1) fails a job at its second stall, leaving the row for a human. The
          // row counts its own resumes and ends the job with a clear message at its bound
          // (lib/runs/crash-resume.ts); BullMQ's count is set one above it, so it never decides first.
          maxStalledCount: MAX_CRASH_RESUMES + 1,
          // The sync queue's jobs start again after every reschedule: a high cap, not none.
          ...rescheduleWorkerOptions(queueName),
        },
      ),
  );
  for (const w of workers) {
    w.on("error", (err) => log.error({ err, queue: w.name }, "worker error"));
    w.on("failed", (job, err) => log.debug({ jobId: job?.data?.jobId, err: err.message }, "queue job failed"));
  }
  const stopReaper = startReaper(connection, log.child({ scheduler: "reaper" }), (kind) =>
    metrics.jobsReaped.inc({ kind }),
  );
  const stopReserveSweeper = startReserveSweeper(connection, log.child({ scheduler: "reserve-sweeper" }));
  const stopAnswersPruner = startAnswersPruner(connection, log.child({ scheduler: "answers-pruner" }));
  const stopSweeps = startOverdueSweepSchedule(log.child({ scheduler: "overdue-invoices" }));
  // Job endings to tenants' endpoints, on their own queue: a job never waits on a receiver.
  const stopWebhooks = startWebhookDelivery({ connection, log: log.child({ component: "webhooks" }) });

  const presenceKey = key("workers", `${hostname()}:${process.pid}`);
  const presence = JSON.stringify({
    host: hostname(),
    pid: process.pid,
    queues,
    concurrency: e.BOUNDED_WORKER_CONCURRENCY,
    startedAt: new Date().toISOString(),
  });
  const announce = () =>
    connection
      .set(presenceKey, presence, "PX", PRESENCE_MS * 3)
      .catch((err) => log.warn({ err: err.message }, "presence update failed"));
  await announce();
  const presenceTimer = setInterval(announce, PRESENCE_MS);
  // What this process really uses, for the /budgets page (and drift between workers).
  const budgetPublisher = await startBudgetPublisher({
    queues,
    concurrency: e.BOUNDED_WORKER_CONCURRENCY,
    redis: connection,
  });
  // Web and workers together on /api/metrics: this process's counters go through Redis.
  const stopMetrics = startMetricsPublisher("workers");
  // A service that answers again wakes the jobs waiting for it at once (lib/runs/outage-waits.ts).
  const stopWaking = wakeWaitersOnRecovery();
  log.info({ queues, concurrency: e.BOUNDED_WORKER_CONCURRENCY, pid: process.pid }, "workers started");

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "stopping workers: letting running jobs finish");
    clearInterval(presenceTimer);
    stopReaper();
    stopReserveSweeper();
    stopAnswersPruner();
    stopWaking();
    await stopSweeps();
    const grace = setTimeout(() => {
      log.warn("running jobs did not finish in time; handing them back so they resume elsewhere");
      shutdown.abort(new WorkerShutdown("worker process is stopping"));
    }, SHUTDOWN_GRACE_MS);
    await Promise.all([...workers.map((w) => w.close()), stopWebhooks()]);
    clearTimeout(grace);
    await watchdog.stop();
    await stopListening();
    await connection.del(presenceKey).catch(() => undefined);
    await budgetPublisher.stop();
    await stopMetrics();
    await connection.quit().catch(() => undefined);
    await closeQueues();
    await closeWebhookQueue();
    await closeRedis();
    await flushModelCallRecords();
    await flushProjections();
    await closeDb();
    await stopTracing();
    log.info("workers stopped");
    process.exit(0);
  };
  clearTimeout(startupGiveUp);
  onStopSignal = (signal) => void stop(signal);
  if (stopAsked) void stop(stopAsked);
}

main().catch((err) => {
  log.fatal({ err }, "worker process failed to start");
  process.exit(1);
});
