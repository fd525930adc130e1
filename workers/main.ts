import { hostname } from "node:os";
import { DelayedError, Worker, type Job as QueueJob } from "bullmq";
import { closeDb, db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { createRedis, key } from "@/lib/redis/client";
import { flushModelCallRecords } from "@/lib/modelcalls/record";
import { PROCESSORS, WORKER_QUEUES } from "./catalog";
import { runJob } from "./runtime";

const log = logger("workers");

/** A run interrupted because this worker process is stopping; the job resumes elsewhere. */
export class WorkerShutdown extends Error {
  override name = "WorkerShutdown";
}

/** How long a stopping worker lets running jobs finish before it interrupts them. */
const SHUTDOWN_GRACE_MS = 10_000;
const HEARTBEAT_MS = 5_000;

async function main() {
  const e = env();
  if (e.BOUNDED_TIME_SCALE !== 1) log.warn({ timeScale: e.BOUNDED_TIME_SCALE }, `BOUNDED_TIME_SCALE=${e.BOUNDED_TIME_SCALE}: every duration is scaled`);
  const connection = createRedis("worker");
  const shutdown = new AbortController();
  const workers = WORKER_QUEUES.map(
    (queueName) =>
      new Worker(
        queueName,
        async (queueJob: QueueJob, token?: string) => {
          try {
            await runJob(PROCESSORS, queueJob, shutdown.signal, log.child({ queue: queueName }));
          } catch (err) {
            if (err instanceof WorkerShutdown || shutdown.signal.reason === err) {
              // Hand the job back without spending an attempt: another worker resumes at the cursor.
              const { jobId } = queueJob.data as { jobId: string };
              await db().job.updateMany({
                where: { id: jobId, status: "running" },
                data: { status: "queued", message: "Interrupted by a worker restart; it will resume where it stopped." },
              });
              await queueJob.moveToDelayed(Date.now(), token);
              throw new DelayedError();
            }
            throw err;
          }
        },
        { connection, prefix: e.BOUNDED_REDIS_PREFIX, concurrency: e.BOUNDED_WORKER_CONCURRENCY, autorun: true },
      ),
  );
  for (const w of workers) {
    w.on("error", (err) => log.error({ err, queue: w.name }, "worker error"));
    w.on("failed", (job, err) => log.warn({ jobId: job?.data?.jobId, err: err.message }, "queue job failed"));
  }

  const heartbeatKey = key("workers", `${hostname()}:${process.pid}`);
  const info = JSON.stringify({ host: hostname(), pid: process.pid, queues: WORKER_QUEUES, concurrency: e.BOUNDED_WORKER_CONCURRENCY, startedAt: new Date().toISOString() });
  const beat = () => connection.set(heartbeatKey, info, "PX", HEARTBEAT_MS * 3).catch((err) => log.warn({ err: err.message }, "heartbeat failed"));
  await beat();
  const heartbeat = setInterval(beat, HEARTBEAT_MS);
  log.info({ queues: WORKER_QUEUES, concurrency: e.BOUNDED_WORKER_CONCURRENCY, pid: process.pid }, "workers started");

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "stopping workers: letting running jobs finish");
    clearInterval(heartbeat);
    const grace = setTimeout(() => {
      log.warn("running jobs did not finish in time; interrupting them so they resume elsewhere");
      shutdown.abort(new WorkerShutdown("worker process is stopping"));
    }, SHUTDOWN_GRACE_MS);
    await Promise.all(workers.map((w) => w.close()));
    clearTimeout(grace);
    await connection.del(heartbeatKey).catch(() => undefined);
    await connection.quit().catch(() => undefined);
    await flushModelCallRecords();
    await closeDb();
    log.info("workers stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

main().catch((err) => {
  log.fatal({ err }, "worker process failed to start");
  process.exit(1);
});
