import { DelayedError, UnrecoverableError, type Job as QueueJob } from "bullmq";
import type { Logger } from "@/lib/log";
import { runRescheduling, reschedules } from "./reschedule";
import { runJob, type HardLimitWatch, type Processor } from "./runtime";

export interface QueueProcessorDeps {
  processors: Record<string, Processor>;
  /** Aborts when the worker process stops. */
  shutdown: AbortSignal;
  log: Logger;
  watch?: HardLimitWatch;
}

/**
 * The BullMQ processor of one queue: runs the queue job's row under the deadline policy, under
 * the reschedule policy too for the queues that have it, and hands a run interrupted by a
 * stopping worker back to the queue without spending an attempt.
 */
export function queueProcessor(queueName: string, deps: QueueProcessorDeps): (queueJob: QueueJob, token?: string) => Promise<void> {
  const log = deps.log.child({ queue: queueName });
  const rescheduling = reschedules(queueName);
  return async (queueJob, token) => {
    try {
      const run = () => runJob(deps.processors, queueJob, deps.shutdown, log, deps.watch);
      await (rescheduling ? runRescheduling(queueJob, token, run) : run());
    } catch (err) {
      // Already moved to delayed (a reschedule): nothing more to do with the queue job.
      if (err instanceof DelayedError) throw err;
      if (deps.shutdown.aborted && !(err instanceof UnrecoverableError)) {
        // runJob put the row back to queued; hand the queue job back without spending an
        // attempt, so another worker resumes at the cursor.
        await queueJob.moveToDelayed(Date.now(), token);
        throw new DelayedError();
      }
      throw err;
    }
  };
}
