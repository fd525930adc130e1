import { Queue } from "bullmq";
import { env } from "@/lib/env";
import { redis } from "@/lib/redis/client";
import { currentTraceparent } from "@/lib/tracing/tracing";
import { QUEUE_NAMES, type JobKind, type JobPayload, type QueueName } from "@/lib/catalog/catalog";
import { MAX_PRIORITY } from "./fairness";

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
 * Removes a queue job that no worker holds (waiting, delayed, finished), by id; one a worker is
 * running stays (BullMQ refuses to remove a locked job) and ends with its run. Unknown queues and
 * ids are nothing to remove.
 */
export async function removeQueueJob(queueName: string, queueJobId: string): Promise<void> {
  if (!(QUEUE_NAMES as readonly string[]).includes(queueName)) return;
  await queue(queueName as QueueName).remove(queueJobId);
}

/** The queue job could not be added for this row: another run still holds the queue job id. */
class QueueJobIdTaken extends Error {
  override name = "QueueJobIdTaken";
}

export interface EnqueueOptions {
  /**
   * The BullMQ job id when it is not the row's (one per tenant and family for syncs).
   * @defaultValue the row id, `payload.jobId`
   */
  queueJobId?: string;
  /** The job's place in line: `tenantPriority(…)` for a fresh job, `RETRY_PRIORITY` for a retry. */
  priority: number;
  /**
   * The W3C `traceparent` the run continues (its spans and outbound calls join that trace).
   * @defaultValue the trace of the code enqueueing (a request's), if one is running
   */
  traceparent?: string;
}

/**
 * Enqueues the queue job that runs a Job row. The BullMQ job id is the row id (or `queueJobId`,
 * one per tenant and family for syncs), so enqueueing twice never runs a row twice. Jobs are not
 * retried blindly by BullMQ: a run resumes at the row's cursor when someone decides to retry.
 *
 * With a `queueJobId` shared by successive rows, a finished queue job of an earlier row is
 * removed first; one that is still waiting, delayed or active belongs to a live run, and the add
 * is refused with `QueueJobIdTaken` (BullMQ would drop it silently).
 *
 * The priority is required: BullMQ serves a job without one before every prioritized job, so a
 * caller that forgot it would jump the whole line (see ./fairness.ts for the numbers).
 */
export async function enqueueJob(
  queueName: QueueName,
  kind: JobKind,
  payload: JobPayload,
  options: EnqueueOptions,
): Promise<void> {
  if (!Number.isInteger(options.priority) || options.priority < 1 || options.priority > MAX_PRIORITY)
    throw new RangeError(`a queue job's priority is an integer from 1 to ${MAX_PRIORITY}, got ${options.priority}`);
  const queueJobId = options.queueJobId ?? payload.jobId;
  const q = queue(queueName);
  if (queueJobId !== payload.jobId) {
    const previous = await q.getJob(queueJobId);
    if (previous && previous.data?.jobId !== payload.jobId) {
      const state = await previous.getState();
      if (state !== "completed" && state !== "failed" && state !== "unknown")
        throw new QueueJobIdTaken(`queue job ${queueJobId} is still ${state} for job ${String(previous.data?.jobId)}`);
      await previous.remove();
    }
  }
  // The name is the kind and the data says what the job is, for anyone reading the queue.
  const traceparent = options.traceparent ?? currentTraceparent();
  await q.add(
    kind,
    { ...payload, kind, ...(traceparent ? { traceparent } : {}) },
    {
      jobId: queueJobId,
      priority: options.priority,
      attempts: 1,
      removeOnComplete: { age: 24 * 3600, count: 10_000 },
      removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
    },
  );
}

/**
 * Queues a row again that has run before or whose queue job was lost (a retry, the reaper's
 * resume): its own earlier queue job, finished or stranded, is removed first — it keeps its id
 * for a while, and BullMQ would drop an add with that id. An earlier queue job still locked by a
 * worker cannot be removed: this throws, and the row is queued again once that run has ended.
 */
export async function requeueJob(
  queueName: QueueName,
  kind: JobKind,
  payload: JobPayload,
  options: EnqueueOptions,
): Promise<void> {
  const previous = await queue(queueName).getJob(options.queueJobId ?? payload.jobId);
  if (previous && previous.data?.jobId === payload.jobId) await previous.remove();
  await enqueueJob(queueName, kind, payload, options);
}

export async function closeQueues(): Promise<void> {
  const queues = [...(holder.__boundedQueues?.values() ?? [])];
  holder.__boundedQueues = undefined;
  await Promise.all(queues.map((q) => q.close()));
}
