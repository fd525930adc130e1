import { hostname } from "node:os";
import { Worker } from "bullmq";
import { validateBudgets } from "@/lib/budgets/budgets";
import { validateReservationPolicy } from "@/lib/quota/settings";
import { modelRouting } from "@/lib/model-providers";
import { startBudgetPublisher, type BudgetPublisher } from "@/lib/budgets/runtime";
import { listenForCategoryChanges } from "@/lib/categories/cache";
import { startOverdueSweepSchedule } from "@/lib/invoices/schedule";
import { closeDb } from "@/lib/db/client";
import { DependencyPause, whileUnavailable } from "@/lib/dependencies/pause";
import { env, type Env } from "@/lib/env";
import { MAX_CRASH_RESUMES } from "@/lib/runs/crash-resume";
import { WorkerShutdown } from "@/lib/core/signals";
import { logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { startMetricsPublisher } from "@/lib/reports/metrics-publish";
import { flushModelCallRecords } from "@/lib/modelcalls/record";
import { flushProjections } from "@/lib/runs/projection-writes";
import { wakeWaitersOnRecovery } from "@/lib/runs/outage-waits";
import { announcePresence, PRESENCE_MS, withdrawPresence } from "@/lib/queues/presence";
import { closeQueues } from "@/lib/queues/queues";
import { closeRedis, createRedis, type RedisClient } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import { startTracing } from "@/lib/tracing/tracing";
import { PROCESSORS } from "./catalog";
import { queueProcessor } from "./queue-processor";
import { rescheduleWorkerOptions } from "@/lib/runs/reschedule";
import { startReaper } from "./schedulers/reaper";
import { startAnswersPruner } from "./schedulers/answers-pruner";
import { startRetention } from "./schedulers/retention";
import { startTenantDeletions } from "./schedulers/tenant-deletions";
import { startReserveSweeper } from "./schedulers/sweeper";
import { startWatchdog } from "@/lib/runs/watchdog";
import { startWebhookDelivery } from "./webhooks/worker";
import { closeWebhookQueue } from "@/lib/webhooks/queue";

const log = logger("workers");

/** How long a stopping worker lets running jobs finish before it hands them back to the queue. */
const SHUTDOWN_GRACE_MS = 10_000;

/**
 * A stop asked for while the process is still starting (a deploy, Ctrl-C) is kept and carried out
 * once there is something to stop in order, instead of Node's default of dying on the spot. A
 * start-up that hangs (a service that does not answer) is not waited for past 10 s.
 */
interface StopSignals {
  /** The first signal that came while starting. */
  asked?: string;
  giveUp?: NodeJS.Timeout;
  /** What a SIGTERM or SIGINT does: kept while starting, the stop once started. */
  onSignal: (signal: string) => void;
}

/** What a started worker process holds, each stopped in turn when it stops. */
interface WorkerProcess {
  connection: RedisClient;
  shutdown: AbortController;
  watchdog: ReturnType<typeof startWatchdog>;
  stopListening: () => Promise<void>;
  stopTracing: () => Promise<void>;
  workers: Worker[];
  schedulers: Schedulers;
  presence: Presence;
  budgetPublisher: BudgetPublisher;
  stopMetrics: () => Promise<void>;
  stopWaking: () => void;
  stopping: boolean;
}

/** The periodic tasks and the webhook delivery this process runs beside its queues' workers: how to stop each. */
interface Schedulers {
  stopReaper: () => void;
  stopReserveSweeper: () => void;
  stopAnswersPruner: () => void;
  stopRetention: () => void;
  stopTenantDeletions: () => void;
  stopSweeps: () => Promise<void>;
  stopWebhooks: () => Promise<void>;
}

/** This process's entry in Redis that says it is alive and which queues it consumes, and the timer renewing it. */
interface Presence {
  id: string;
  timer: NodeJS.Timeout;
}

/** Keeps a SIGTERM or SIGINT that comes while the process starts; exits if start-up is not done 10 s after it. */
function holdStopSignals(): StopSignals {
  const signals: StopSignals = {
    onSignal: (signal) => {
      signals.asked ??= signal;
      signals.giveUp ??= setTimeout(() => {
        log.warn({ signal }, "stopped while still starting");
        process.exit(1);
      }, 10_000);
    },
  };
  process.on("SIGTERM", () => signals.onSignal("SIGTERM"));
  process.on("SIGINT", () => signals.onSignal("SIGINT"));
  return signals;
}

/** Hands the signals to the stop now that the process has started, and carries out one kept while it started. */
function releaseStopSignals(signals: StopSignals, p: WorkerProcess): void {
  clearTimeout(signals.giveUp);
  signals.onSignal = (signal) => void stop(p, signal);
  if (signals.asked) void stop(p, signals.asked);
}

/** The environment, its budgets, reservation policy and model routes checked: a configuration that cannot work stops start-up. */
function checkedEnv(): Env {
  const e = env();
  // A budget that cannot work (hard ≤ soft) stops start-up with one line naming the variables.
  validateBudgets(e);
  // A sweep window shorter than the worst case of a generation × margin would take reserves of
  // generations that can still finish: refuse to start, naming both numbers.
  validateReservationPolicy(e);
  // The model providers and their routes: every mistake a line of its own.
  modelRouting();
  if (e.BOUNDED_TIME_SCALE !== 1)
    log.warn(
      { timeScale: e.BOUNDED_TIME_SCALE },
      `BOUNDED_TIME_SCALE=${e.BOUNDED_TIME_SCALE}: every duration is scaled`,
    );
  return e;
}

/** A BullMQ worker for each queue of this process, running jobs through the catalog's processors. */
function startWorkers(
  e: Env,
  connection: RedisClient,
  shutdown: AbortSignal,
  watchdog: ReturnType<typeof startWatchdog>,
): Worker[] {
  // A lost lock is how BullMQ notices a dead worker; scaled like everything else, but never so
  // short that an ordinary pause of the event loop looks like a death.
  const lockDuration = Math.max(scaled(30_000), 5_000);
  // Every process checks for stalled jobs twice per lock duration: a killed worker's jobs go back
  // to the queue within about 1.5 lock durations of its death (its lock lapses, the next check
  // moves them), well inside any job's hard limit, so a live worker resumes them at their cursor
  // before the reaper would have to.
  const stalledInterval = Math.max(Math.round(lockDuration / 2), 1_000);
  // The queues of this process (BOUNDED_WORKER_QUEUES, default all): a pool of processes of its own
  // for big imports, say. Its presence names them, so readiness and the queues page see which
  // queue has a live worker.
  const workers = e.BOUNDED_WORKER_QUEUES.map(
    (queueName) =>
      new Worker(queueName, queueProcessor(queueName, { processors: PROCESSORS, shutdown, log, watch: watchdog }), {
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
      }),
  );
  for (const w of workers) {
    w.on("error", (err) => log.error({ err, queue: w.name }, "worker error"));
    w.on("failed", (job, err) => log.debug({ jobId: job?.data?.jobId, err: err.message }, "queue job failed"));
  }
  return workers;
}

/** The periodic tasks (reaper, reserve sweeper, answers pruner, retention, tenant deletions, overdue invoices) and the webhook delivery. */
function startSchedulers(connection: RedisClient): Schedulers {
  const stopReaper = startReaper(connection, log.child({ scheduler: "reaper" }), (kind) =>
    metrics.jobsReaped.inc({ kind }),
  );
  const stopReserveSweeper = startReserveSweeper(connection, log.child({ scheduler: "reserve-sweeper" }));
  const stopAnswersPruner = startAnswersPruner(connection, log.child({ scheduler: "answers-pruner" }));
  const stopRetention = startRetention(connection, log.child({ scheduler: "retention" }));
  const stopTenantDeletions = startTenantDeletions(connection, log.child({ scheduler: "tenant-deletions" }));
  const stopSweeps = startOverdueSweepSchedule(log.child({ scheduler: "overdue-invoices" }));
  // Job endings to tenants' endpoints, on their own queue: a job never waits on a receiver.
  const stopWebhooks = startWebhookDelivery({ connection, log: log.child({ component: "webhooks" }) });
  return {
    stopReaper,
    stopReserveSweeper,
    stopAnswersPruner,
    stopRetention,
    stopTenantDeletions,
    stopSweeps,
    stopWebhooks,
  };
}

/** Says in Redis that this process is alive, with its queues and concurrency, and renews it every PRESENCE_MS. */
async function startPresence(e: Env, connection: RedisClient): Promise<Presence> {
  const id = `${hostname()}:${process.pid}`;
  const presence = {
    host: hostname(),
    pid: process.pid,
    queues: e.BOUNDED_WORKER_QUEUES,
    concurrency: e.BOUNDED_WORKER_CONCURRENCY,
    startedAt: new Date().toISOString(),
  };
  const announce = () =>
    announcePresence(connection, id, presence).catch((err) => log.warn({ err: err.message }, "presence update failed"));
  await announce();
  return { id, timer: setInterval(announce, PRESENCE_MS) };
}

/** Stops the process once, in order: no new work, running jobs finished or handed back, all closed and flushed. */
async function stop(p: WorkerProcess, signal: string): Promise<void> {
  if (p.stopping) return;
  p.stopping = true;
  log.info({ signal }, "stopping workers: letting running jobs finish");
  clearInterval(p.presence.timer);
  p.schedulers.stopReaper();
  p.schedulers.stopReserveSweeper();
  p.schedulers.stopAnswersPruner();
  p.schedulers.stopRetention();
  p.schedulers.stopTenantDeletions();
  p.stopWaking();
  await p.schedulers.stopSweeps();
  const grace = setTimeout(() => {
    log.warn("running jobs did not finish in time; handing them back so they resume elsewhere");
    p.shutdown.abort(new WorkerShutdown("worker process is stopping"));
  }, SHUTDOWN_GRACE_MS);
  await Promise.all([...p.workers.map((w) => w.close()), p.schedulers.stopWebhooks()]);
  clearTimeout(grace);
  await p.watchdog.stop();
  await p.stopListening();
  await withdrawPresence(p.connection, p.presence.id).catch(() => undefined);
  await p.budgetPublisher.stop();
  await p.stopMetrics();
  await p.connection.quit().catch(() => undefined);
  await closeQueues();
  await closeWebhookQueue();
  await closeRedis();
  await flushModelCallRecords();
  await flushProjections();
  await closeDb();
  await p.stopTracing();
  log.info("workers stopped");
  process.exit(0);
}

/** The worker process, in order: signals held, checks, connections, workers, periodic tasks, presence, publishers. */
async function main() {
  const signals = holdStopSignals();
  const e = checkedEnv();
  const connection = createRedis("worker");
  const shutdown = new AbortController();
  const watchdog = startWatchdog();
  // A worker (re)started while PostgreSQL is down waits for it instead of exiting.
  const stopListening = await whileUnavailable(
    () => listenForCategoryChanges(),
    new DependencyPause(shutdown.signal, log),
  );
  // Spans of job runs and their outbound calls, when OTEL_EXPORTER_OTLP_ENDPOINT is set.
  const stopTracing = await startTracing();
  const workers = startWorkers(e, connection, shutdown.signal, watchdog);
  const schedulers = startSchedulers(connection);
  const presence = await startPresence(e, connection);
  // What this process really uses, for the /budgets page (and drift between workers).
  const budgetPublisher = await startBudgetPublisher({
    queues: e.BOUNDED_WORKER_QUEUES,
    concurrency: e.BOUNDED_WORKER_CONCURRENCY,
    redis: connection,
  });
  // Web and workers together on /api/metrics: this process's counters go through Redis.
  const stopMetrics = startMetricsPublisher("workers");
  // A service that answers again wakes the jobs waiting for it at once (lib/runs/outage-waits.ts).
  const stopWaking = wakeWaitersOnRecovery();
  log.info(
    { queues: e.BOUNDED_WORKER_QUEUES, concurrency: e.BOUNDED_WORKER_CONCURRENCY, pid: process.pid },
    "workers started",
  );
  releaseStopSignals(signals, {
    connection,
    shutdown,
    watchdog,
    stopListening,
    stopTracing,
    workers,
    schedulers,
    presence,
    budgetPublisher,
    stopMetrics,
    stopWaking,
    stopping: false,
  });
}

main().catch((err) => {
  log.fatal({ err }, "worker process failed to start");
  process.exit(1);
});
