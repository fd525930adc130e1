import type { Job as QueueJob } from "bullmq";
import type { Logger } from "@/lib/log";
import { jobPayloadSchema } from "@/lib/catalog/catalog";
import { parseTraceparent } from "@/lib/tracing/traceparent";
import { inSpan } from "@/lib/tracing/tracing";
import type { HardLimitWatch, Processor } from "@/lib/runs/processor";
import { mirrorProgress } from "@/lib/runs/queue-job";
import { runJob } from "@/lib/runs/run-job";

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
 * rescheduling queue, a stopping worker). The run itself, from its start to its
 * outcome, is lib/runs (`runJob`, lib/runs/run-job.ts).
 */
export function queueProcessor(
  queueName: string,
  deps: QueueProcessorDeps,
): (queueJob: QueueJob, token?: string) => Promise<void> {
  const log = deps.log.child({ queue: queueName });
  return (queueJob, token) => {
    const data = jobPayloadSchema.safeParse(queueJob.data);
    const jobId = data.success ? data.data.jobId : undefined;
    // One span per run, continuing the trace of the request that started the job (its data's
    // `traceparent`): the run's outbound calls are its children.
    return inSpan(
      `run ${queueJob.name}`,
      {
        kind: "consumer",
        parent: parseTraceparent(data.data?.traceparent),
        attributes: {
          "messaging.destination.name": queueName,
          "bounded.job.id": jobId ?? "",
          "bounded.job.kind": queueJob.name,
        },
      },
      async () => {
        try {
          await runJob(deps.processors, queueJob, deps.shutdown, log, deps.watch, token);
        } catch (err) {
          // The counts of a run that did not complete, best effort: not awaited, so how the queue
          // job ended is recorded as soon as the row's is. A completed run copied its own from
          // its finish (lib/runs/outcome.ts).
          if (jobId) void mirrorProgress(queueJob, jobId);
          throw err;
        }
      },
    );
  };
}
