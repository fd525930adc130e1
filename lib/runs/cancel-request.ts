import { z } from "zod";
import { db } from "@/lib/db/client";
import { key, redis } from "@/lib/redis/client";
import { nounOf, progressPhrase, type FinalRow } from "@/lib/jobs/messages";
import type { JobStatus } from "@/lib/core/job-statuses";
import { REQUEST_EVENT, RETRY_EVENT } from "@/lib/core/cancel-events";
import type { RunStart } from "./attempt";
import { finalizeJob } from "./finalize";

/**
 * A cancel as the running attempt sees it. An operator's request (lib/actions/cancel.ts) is
 * recorded on the job as a `cancel_requested` timeline event (the durable record) and announced
 * through a Redis key (the fast path); the run polls the key every `CANCEL_POLL_MS`, checks the
 * event when it starts and at each heartbeat, and ends its row `cancelled` with who asked.
 */

/** How often a running job looks for a cancel request: a person is waiting for the stop. Real time, not scaled. */
export const CANCEL_POLL_MS = 500;

/** Who asked for a running job to stop, and why. */
export interface CancelAsk {
  by: string;
  reason: string | null;
}

export const cancelKey = (jobId: string) => key("jobs", "cancel", jobId);

/** A request's message names who asked, read back by `pendingCancel`. */
const REQUESTED_BY = /^Cancel requested by (\S+?)(?: \(“(.*)”\))?:/s;

export function why(reason: string | null | undefined): string {
  return reason ? ` (“${reason}”)` : "";
}

/** The final message of a cancelled job, from its committed counts. */
export function cancelledMessage(
  ask: CancelAsk,
  row: Pick<FinalRow, "kind" | "total" | "processed" | "failed">,
): string {
  const done = row.processed + row.failed;
  if (done === 0)
    return `Cancelled by ${ask.by}${why(ask.reason)} before any ${nounOf(row.kind)} was done. Retry to run it.`;
  return `Cancelled by ${ask.by}${why(ask.reason)} after ${progressPhrase(row)}; the ${nounOf(row.kind)}s done are kept. Retry to continue from where it stopped.`;
}

export type Tx = Parameters<Parameters<ReturnType<typeof db>["$transaction"]>[0]>[0];

/** The newest cancel request or retry of a job: a request is open when no retry came after it. */
export async function latestRequestEvent(client: Tx | ReturnType<typeof db>, jobId: string) {
  return client.jobEvent.findFirst({
    where: { jobId, type: { in: [REQUEST_EVENT, RETRY_EVENT] } },
    orderBy: { id: "desc" },
    select: { type: true, message: true },
  });
}

/**
 * The fast check a running attempt makes every `CANCEL_POLL_MS`: the Redis key, for this attempt.
 * Errors (Redis briefly away) read as "no request": the heartbeat's check of the row covers them.
 */
export async function cancelAnnounced(jobId: string, attempt: number): Promise<CancelAsk | null> {
  const raw = await redis()
    .get(cancelKey(jobId))
    .catch(() => null);
  if (!raw) return null;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return null;
  }
  const parsed = z.object({ attempt: z.number(), by: z.string(), reason: z.string().nullable() }).safeParse(value);
  if (!parsed.success || parsed.data.attempt !== attempt) return null;
  return { by: parsed.data.by, reason: parsed.data.reason };
}

/** The durable check (at a run's start and at each heartbeat): an open request on the row, if any. */
export async function pendingCancel(jobId: string): Promise<CancelAsk | null> {
  const latest = await latestRequestEvent(db(), jobId);
  return latest?.type === REQUEST_EVENT ? askOf(latest.message) : null;
}

/** The open request a run's start read with the row (lib/runs/attempt.ts), or read now when it did not. */
export async function cancelAskedAtStart(run: RunStart): Promise<CancelAsk | null> {
  if (run.cancelRequest === undefined) return pendingCancel(run.jobId);
  return run.cancelRequest === null ? null : askOf(run.cancelRequest);
}

function askOf(message: string): CancelAsk {
  const m = REQUESTED_BY.exec(message);
  return { by: m?.[1] ?? "an operator", reason: m?.[2] ?? null };
}

/**
 * Ends a run that was asked to stop: `cancelled`, with its committed counts and who asked, if the
 * attempt still owns the running row. The status flip fences the attempt, so an item still in
 * flight cannot commit after it.
 */
export async function finalizeCancelled(run: RunStart, ask: CancelAsk): Promise<JobStatus | null> {
  const status = await finalizeJob(run.jobId, run.attempt, {
    status: "cancelled",
    from: ["running"],
    known: run,
    message: (row) => cancelledMessage(ask, row),
  });
  if (status)
    await redis()
      .del(cancelKey(run.jobId))
      .catch(() => 0);
  return status;
}
