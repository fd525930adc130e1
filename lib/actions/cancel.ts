import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { db } from "@/lib/db/client";
import type { Described } from "@/lib/http/operator";
import { logger } from "@/lib/log";
import type { QueueName } from "@/lib/catalog/catalog";
import { queue } from "@/lib/queues/queues";
import { redis } from "@/lib/redis/client";
import { heartbeatIntervalMs } from "@/lib/jobs/liveness";
import { nounOf } from "@/lib/jobs/messages";
import { cancelKey, cancelledMessage, latestRequestEvent, why, type CancelAsk } from "@/lib/runs/cancel-request";
import { REQUEST_EVENT } from "@/lib/core/cancel-events";
import { finalizeJob } from "@/lib/runs/finalize";
import { cancelOpenBatch } from "@/lib/runs/batch-lane";
import { isTerminal, STATUS_LABEL, type JobStatus } from "@/lib/core/job-statuses";

/**
 * Cancelling a job (an operator's control, as Trigger.dev and Temporal offer it).
 *
 * - queued or delayed: the row becomes `cancelled` in one fenced statement (twenty concurrent
 *   cancels: one wins) and its queue job is removed; a worker that picks the queue job up anyway
 *   finds the row terminal and does not run it.
 * - running: the request is recorded on the job (a `cancel_requested` timeline event, written
 *   under the row's lock) and announced through a Redis key the run polls every
 *   `CANCEL_POLL_MS`. The run then finalizes its row `cancelled` (its committed progress kept) and
 *   aborts its signal with `JobCancelled`, so nothing new is dispatched and items in flight end.
 *   A key rather than pub/sub: a message published while a worker's subscriber reconnects is lost,
 *   a key is still there at the next poll, and a GET per running job per half second is nothing to
 *   Redis. The event is the durable record: a run checks it when it starts and at each heartbeat,
 *   so a request survives a Redis restart and a run handed back to the queue. A running row whose
 *   worker stopped heartbeating (no one would hear the request) is finalized `cancelled` at once.
 * - a split job: it becomes `cancelled` at once (so it makes no further parts) and each open part
 *   is cancelled as above.
 * - terminal: refused with the reason.
 *
 * A cancelled job can be retried: it resumes at its cursor.
 */

const log = logger("cancel");

/** Heartbeats a running job may miss before it counts as having no live worker (as the stuck list counts). */
const SILENT_BEATS = 3;
/**
 * Never less silence than this, in real time: at a small time scale three heartbeats are a second
 * or two, which a live worker on a loaded machine can miss; it is the request that should stop it.
 */
const MIN_SILENCE_MS = 10_000;

/** How long the fast-path key outlives its request (a run sees it within a poll; the event is the durable record). */
const KEY_TTL_S = 24 * 3600;

export const cancelRequestSchema = z
  .object({
    /** Why, in the operator's words: kept in the job's message and timeline. */
    reason: z.string().trim().max(500, "The reason is at most 500 characters").optional(),
  })
  .strict();
export type CancelRequest = z.infer<typeof cancelRequestSchema>;

export type CancelResult =
  /** It had not started (or was waiting): it is `cancelled` now; `parts` open parts of a split job went with it. */
  | { type: "cancelled"; jobId: string; status: "cancelled"; message: string; parts: number }
  /** It is running: its worker stops it before its next item and ends it `cancelled`. */
  | { type: "cancelling"; jobId: string; status: "running"; message: string }
  | { type: "not_found" }
  | { type: "not_cancellable"; status: JobStatus; message: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function refusalFor(status: JobStatus): string {
  if (status === "completed" || status === "completed_with_errors")
    return "It already completed: there is nothing left to stop.";
  if (status === "cancelled") return "It was already cancelled.";
  return `It already ended (${STATUS_LABEL[status].toLowerCase()}): there is nothing left to stop.`;
}

/**
 * Cancels a job for `by` (see the module comment). Row-level and fenced: concurrent cancels of
 * one job give one cancel (the others are refused with the reason), and a cancel racing a worker
 * that starts the job either stops it before it runs or becomes a request to the running attempt.
 */
export async function cancelJob(jobId: string, by: Principal, request: CancelRequest = {}): Promise<CancelResult> {
  if (!UUID.test(jobId)) return { type: "not_found" };
  return cancelFor(jobId, { by: by.username, reason: request.reason || null });
}

async function cancelFor(jobId: string, ask: CancelAsk): Promise<CancelResult> {
  // A row can move under us (a worker starts it, a run hands it back): look again, a few times.
  for (let round = 0; round < 3; round++) {
    const job = await db().job.findUnique({
      where: { id: jobId },
      select: {
        status: true,
        attempt: true,
        kind: true,
        queue: true,
        queueJobId: true,
        heartbeatAt: true,
        _count: { select: { children: true } },
      },
    });
    if (!job) return { type: "not_found" };
    if (isTerminal(job.status)) return { type: "not_cancellable", status: job.status, message: refusalFor(job.status) };

    if (job._count.children > 0) return cancelSplit(jobId, job.attempt, job.kind, ask);

    if (job.status === "queued" || job.status === "delayed") {
      const status = await finalizeJob(jobId, job.attempt, {
        status: "cancelled",
        from: ["queued", "delayed"],
        message: (row) => cancelledMessage(ask, row),
      });
      if (status === null) continue;
      await removeQueueJob(job.queue, job.queueJobId ?? jobId, jobId);
      // Its rows with the provider's batch service: that batch is cancelled too (lib/runs/batch-lane.ts).
      if (job.status === "delayed") await cancelOpenBatch(jobId, log);
      const row = await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { message: true } });
      return { type: "cancelled", jobId, status: "cancelled", message: row.message ?? "Cancelled.", parts: 0 };
    }

    // A run that stopped heartbeating has no worker to hear the request: end it here. Should its
    // worker still be alive, the status flip fences whatever it would commit.
    if (
      job.heartbeatAt &&
      Date.now() - job.heartbeatAt.getTime() > Math.max(SILENT_BEATS * heartbeatIntervalMs(), MIN_SILENCE_MS)
    ) {
      const status = await finalizeJob(jobId, job.attempt, {
        status: "cancelled",
        from: ["running"],
        message: (row) => cancelledMessage(ask, row),
      });
      if (status === null) continue;
      const row = await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { message: true } });
      return { type: "cancelled", jobId, status: "cancelled", message: row.message ?? "Cancelled.", parts: 0 };
    }

    const requested = await requestCancel(jobId, ask);
    if (requested.type === "moved") continue;
    if (requested.type === "already") {
      const who = requested.message.replace(/:.*$/s, "").replace(/^Cancel/, "cancel");
      return {
        type: "not_cancellable",
        status: "running",
        message: `It is already stopping (${who}): it ends before its next ${nounOf(job.kind)}.`,
      };
    }
    return { type: "cancelling", jobId, status: "running", message: requested.message };
  }
  const now = await db().job.findUnique({ where: { id: jobId }, select: { status: true } });
  if (!now) return { type: "not_found" };
  return {
    type: "not_cancellable",
    status: now.status,
    message: isTerminal(now.status)
      ? refusalFor(now.status)
      : "The job is changing state right now; try again in a moment.",
  };
}

/** The latest request still open on a running row, or a new one recorded under the row's lock. */
async function requestCancel(
  jobId: string,
  ask: CancelAsk,
): Promise<
  { type: "moved" } | { type: "already"; message: string } | { type: "requested"; attempt: number; message: string }
> {
  const outcome = await db().$transaction(async (tx) => {
    const locked = await tx.$queryRaw<{ status: JobStatus; attempt: number; kind: string }[]>`
      SELECT status, attempt, kind FROM "Job" WHERE id = ${jobId}::uuid FOR UPDATE`;
    const row = locked[0];
    if (row?.status !== "running") return { type: "moved" as const };
    const latest = await latestRequestEvent(tx, jobId);
    if (latest?.type === REQUEST_EVENT) return { type: "already" as const, message: latest.message };
    const message = `Cancel requested by ${ask.by}${why(ask.reason)}: the run stops before its next ${nounOf(row.kind)}, keeping the ${nounOf(row.kind)}s done.`;
    await tx.jobEvent.create({ data: { jobId, type: REQUEST_EVENT, attempt: row.attempt, message } });
    return { type: "requested" as const, attempt: row.attempt, message };
  });
  if (outcome.type === "requested") {
    // The fast path; without it the run still sees the event at its next heartbeat.
    await redis()
      .set(cancelKey(jobId), JSON.stringify({ attempt: outcome.attempt, ...ask }), "EX", KEY_TTL_S)
      .catch((err: unknown) =>
        log.warn({ err, jobId }, "could not announce the cancel in Redis; the run sees it at its next heartbeat"),
      );
  }
  return outcome;
}

/**
 * A split job: cancelled at once (from `running`, so it makes no further part — a part is made
 * only while it runs), then every open part. A part's own end cannot settle it any more.
 */
async function cancelSplit(jobId: string, attempt: number, kind: string, ask: CancelAsk): Promise<CancelResult> {
  const status = await finalizeJob(jobId, attempt, {
    status: "cancelled",
    from: ["running", "queued", "delayed"],
    message: (row) =>
      `${cancelledMessage(ask, row).replace(/ Retry.*$/, "")} Its open parts were cancelled too; retry a part to continue.`,
  });
  if (status === null) {
    const now = await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { status: true } });
    return {
      type: "not_cancellable",
      status: now.status,
      message: isTerminal(now.status)
        ? refusalFor(now.status)
        : "The job is changing state right now; try again in a moment.",
    };
  }
  const open = await db().job.findMany({
    where: { parentId: jobId, status: { in: ["queued", "running", "delayed"] } },
    select: { id: true },
  });
  let parts = 0;
  for (const part of open) {
    const r = await cancelFor(part.id, ask);
    if (r.type === "cancelled" || r.type === "cancelling") parts += 1;
  }
  const row = await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { message: true } });
  log.info({ jobId, kind, parts }, "split job cancelled with its open parts");
  return { type: "cancelled", jobId, status: "cancelled", message: row.message ?? "Cancelled.", parts };
}

/** The queue job of a cancelled row goes; one a worker holds right now stays, and its run finds the row terminal. */
async function removeQueueJob(queueName: string, queueJobId: string, jobId: string): Promise<void> {
  try {
    const queued = await queue(queueName as QueueName).getJob(queueJobId);
    if (queued && queued.data?.jobId === jobId) await queued.remove();
  } catch (err) {
    log.info(
      { err, jobId },
      "the cancelled job's queue job could not be removed now; a worker taking it finds the row cancelled",
    );
  }
}

/** One place that turns a cancel's result into an HTTP status and the words a person reads. */
export function describeCancel(r: CancelResult): Described {
  switch (r.type) {
    case "cancelled":
      return {
        ok: true,
        status: 200,
        code: "cancelled",
        message: r.parts > 0 ? `${r.message} (${r.parts} open part${r.parts === 1 ? "" : "s"} cancelled)` : r.message,
      };
    case "cancelling":
      return {
        ok: true,
        status: 202,
        code: "cancelling",
        message: r.message.replace(/^Cancel requested by [^:]+: /, "Cancel requested: "),
      };
    case "not_found":
      return { ok: false, status: 404, code: "not_found", message: "No job with this id." };
    case "not_cancellable":
      return {
        ok: false,
        status: 409,
        code: "job_not_cancellable",
        message: `This job cannot be cancelled. ${r.message}`,
      };
  }
}
