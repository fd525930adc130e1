import { Queue } from "bullmq";
import { env } from "@/lib/env";
import { redis } from "@/lib/redis/client";
import type { JobKind, JobPayload, QueueName } from "./catalog";

const holder = globalThis as unknown as { __boundedQueues?: Map<QueueName, Queue> };

/** Producer side of a queue, one per process. */
export function queue(name: QueueName): Queue {
  holder.__boundedQueues ??= new Map();
  let q = holder.__boundedQueues.get(name);
  if (!q) {
    q = new Queue(name, { connection: redis(), prefix: env().BOUNDED_REDIS_PREFIX });
    holder.__boundedQueues.set(name, q);
  }
  return q;
}

/**
 * Enqueues the queue job that runs a Job row. The BullMQ job id is the row id, so enqueueing
 * twice never runs a row twice. Jobs are not retried blindly by BullMQ: a run resumes at the
 * row's cursor when someone decides to retry.
 */
export async function enqueueJob(queueName: QueueName, kind: JobKind, payload: JobPayload): Promise<void> {
  await queue(queueName).add(kind, payload, {
    jobId: payload.jobId,
    attempts: 1,
    removeOnComplete: { age: 24 * 3600, count: 10_000 },
    removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
  });
}

export async function closeQueues(): Promise<void> {
  const queues = [...(holder.__boundedQueues?.values() ?? [])];
  holder.__boundedQueues = undefined;
  await Promise.all(queues.map((q) => q.close()));
}
