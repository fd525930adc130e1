import type { Job as QueueJob } from "bullmq";
import { db } from "@/lib/db/client";
import type { RunStart } from "./attempt";
import type { JobPayload } from "@/lib/catalog/catalog";

/**
 * The queue job as tools that read the queue see it (bull-board, `redis-cli`): its name is the
 * kind, its data says what job it runs (never a secret: not the progress token), and its progress
 * is the row's counts. The row stays the record; these are copies, written best effort.
 */

export interface QueueJobProgress {
  processed: number;
  failed: number;
  total: number | null;
}

/** Queue jobs enqueued with only the row id (a retry, a part) get the kind and tenant once their run starts. */
export function describeQueueJob(queueJob: QueueJob, run: RunStart): void {
  const data = queueJob.data as JobPayload;
  if (data.kind && data.tenantId) return;
  void Promise.resolve()
    .then(() => queueJob.updateData({ ...data, kind: run.kind, tenantId: run.tenantId, total: run.total }))
    .catch(() => undefined);
}

const lastMirrored = new WeakMap<QueueJob, string>();

/**
 * Copies the row's committed counts to the queue job's progress (`{ processed, failed, total }`),
 * when they changed. Called at heartbeats and when a run ends, never per item.
 */
export function mirrorProgress(queueJob: QueueJob, jobId: string, known?: QueueJobProgress): Promise<void> {
  return (async () => {
    const row =
      known ??
      (await db().job.findUnique({
        where: { id: jobId },
        select: { processed: true, failed: true, total: true },
      }));
    if (!row) return;
    const progress: QueueJobProgress = { processed: row.processed, failed: row.failed, total: row.total };
    const key = JSON.stringify(progress);
    if (lastMirrored.get(queueJob) === key) return;
    await queueJob.updateProgress(progress as unknown as object);
    lastMirrored.set(queueJob, key);
  })().catch(() => undefined);
}
