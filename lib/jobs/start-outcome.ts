import type { Described } from "@/lib/http/operator";
import { EnqueueFailed } from "./create";

/** The queue could not take a new job; `createJob` removed its row again, so nothing was saved. */
export interface QueueUnavailable {
  type: "queue_unavailable";
  message: string;
}

export type StartOutcome<T> = { type: "started"; started: T } | QueueUnavailable;

/**
 * A job start with its one expected failure as a value: Redis briefly down is not a bug, and its
 * words belong with the other outcomes (`describeQueueUnavailable`); anything else is thrown.
 */
export async function startOrQueueUnavailable<T>(start: Promise<T>): Promise<StartOutcome<T>> {
  try {
    return { type: "started", started: await start };
  } catch (err) {
    if (err instanceof EnqueueFailed) return { type: "queue_unavailable", message: err.message };
    throw err;
  }
}

/**
 * A start the queue refused, told the same way by every route that starts a job: a 503 the caller
 * may retry, audited as an error (not the caller's doing) with the queue's own reason.
 */
export function describeQueueUnavailable(
  r: QueueUnavailable,
  what: string,
  why = "the job queue is unavailable",
): Described {
  return {
    ok: false,
    error: true,
    status: 503,
    code: "queue_unavailable",
    message: `The ${what} cannot be started right now (${why}). Nothing was saved; try again in a minute.`,
    audit: `failed: ${r.message}`,
  };
}

/** A started job as an API caller gets it: the customer's progress page in the body and in `Location`. */
export function describeJobStarted(
  job: { jobId: string; progressToken: string },
  message: string,
  fields: Record<string, unknown> = {},
  status = 201,
): Described {
  const progressUrl = `/progress/${job.progressToken}`;
  return {
    ok: true,
    status,
    code: "started",
    message,
    body: { jobId: job.jobId, progressToken: job.progressToken, progressUrl, ...fields },
    headers: { Location: progressUrl },
  };
}
