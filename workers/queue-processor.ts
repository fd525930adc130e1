import type { Job as QueueJob } from "bullmq";
import type { Logger } from "@/lib/log";
import type { HardLimitWatch, Processor } from "./processor";
import { runJob } from "./runtime";

export interface QueueProcessorDeps {
  processors: Record<string, Processor>;
  /** Aborts when the worker process stops. */
  shutdown: AbortSignal;
  log: Logger;
  watch?: HardLimitWatch;
}

/**
 * The BullMQ processor of one queue: runs the queue job's row with the lock token, so the run's
 * outcome can move the queue job to *delayed* without spending an attempt (a rate-limit wait on a
 * rescheduling queue, a stopping worker). The policies themselves live in runtime.ts,
 * outcome.ts and reschedule.ts.
 */
export function queueProcessor(queueName: string, deps: QueueProcessorDeps): (queueJob: QueueJob, token?: string) => Promise<void> {
  const log = deps.log.child({ queue: queueName });
  return (queueJob, token) => runJob(deps.processors, queueJob, deps.shutdown, log, deps.watch, token);
}
