import type { Job as QueueJob } from "bullmq";
import { DelayedError } from "bullmq";
import { jobPayloadSchema } from "@/lib/queues/catalog";
import { AttemptFenced } from "@/lib/jobs/errors";
import { finishJob, startAttempt, type RunStart } from "@/lib/jobs/run";
import type { Logger } from "@/lib/log";

export interface RunContext {
  run: RunStart;
  /** Aborted when the worker shuts down or the job is cancelled: pass it to everything awaited. */
  signal: AbortSignal;
  log: Logger;
  queueJob: QueueJob;
}

export type Processor = (ctx: RunContext) => Promise<void>;

/**
 * Runs one queue job against its Job row: starts a fenced attempt, runs the processor, and makes
 * sure the row ends in a terminal state a person can read, whatever the processor did.
 */
export async function runJob(
  processors: Record<string, Processor>,
  queueJob: QueueJob,
  signal: AbortSignal,
  log: Logger,
): Promise<void> {
  const { jobId } = jobPayloadSchema.parse(queueJob.data);
  const run = await startAttempt(jobId);
  if (!run) {
    log.info({ jobId }, "job is terminal or gone; nothing to run");
    return;
  }
  const jobLog = log.child({ jobId, kind: run.kind, attempt: run.attempt });
  const processor = processors[run.kind];
  if (!processor) {
    await finishJob(jobId, run.attempt, "failed", `No worker knows the job kind “${run.kind}”.`);
    return;
  }
  jobLog.info("run started");
  try {
    await processor({ run, signal, log: jobLog, queueJob });
  } catch (err) {
    if (err instanceof DelayedError) throw err;
    if (err instanceof AttemptFenced) {
      jobLog.warn("attempt fenced: a newer attempt owns the job; stopping");
      return;
    }
    jobLog.error({ err }, "run failed");
    await finishJob(jobId, run.attempt, "failed", "The job failed because of an internal error. An operator can retry it.");
    throw err;
  }
}
