import type { Job as QueueJob } from "bullmq";
import { db } from "@/lib/db/client";
import { heartbeatIntervalMs } from "@/lib/jobs/liveness";
import type { RunStart } from "./attempt";
import { pendingCancel, type CancelAsk } from "./cancel-request";
import { mirrorProgress } from "./queue-job";

/** Proof of life for a run between item commits (a long model call, a slow page). */
export async function heartbeatRun(jobId: string, attempt: number): Promise<boolean> {
  const { count } = await db().job.updateMany({
    where: { id: jobId, attempt, status: "running" },
    data: { heartbeatAt: new Date() },
  });
  return count > 0;
}

/**
 * Beats every `heartbeatIntervalMs` while the run goes on: the row's sign of life, the counts on
 * the queue job too (for tools that read the queue, bull-board: at heartbeats, not per item), and
 * the durable record of a cancel, for a request whose Redis key was lost.
 */
export function startHeartbeat(
  run: Pick<RunStart, "jobId" | "attempt">,
  queueJob: QueueJob,
  heardCancel: (ask: CancelAsk | null) => void,
): { stop(): void } {
  const beat = setInterval(() => {
    void heartbeatRun(run.jobId, run.attempt).catch(() => undefined);
    void mirrorProgress(queueJob, run.jobId);
    void pendingCancel(run.jobId).then(heardCancel, () => undefined);
  }, heartbeatIntervalMs());
  return { stop: () => clearInterval(beat) };
}
