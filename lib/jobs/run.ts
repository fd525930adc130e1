import { db, type Prisma } from "@/lib/db/client";
import { AttemptFenced } from "./errors";
import { isTerminal, TERMINAL_STATUSES, type JobStatus } from "./statuses";

/** What a run knows about its job once its attempt has started. */
export interface RunStart {
  jobId: string;
  attempt: number;
  cursor: number;
  kind: string;
  queue: string;
  tenantId: string;
  total: number | null;
  processed: number;
  failed: number;
}

/**
 * Starts a new attempt: the attempt number goes up (fencing every older run), the row is
 * `running`. Returns null for a job that is already terminal or no longer exists.
 */
export async function startAttempt(jobId: string, now = new Date()): Promise<RunStart | null> {
  return db().$transaction(async (tx) => {
    // One atomic increment under the row lock: two runs started at once get different attempts.
    const { count } = await tx.job.updateMany({
      where: { id: jobId, status: { notIn: [...TERMINAL_STATUSES] } },
      data: { attempt: { increment: 1 }, status: "running", message: null, heartbeatAt: now },
    });
    if (count === 0) return null;
    await tx.job.updateMany({ where: { id: jobId, startedAt: null }, data: { startedAt: now } });
    const row = await tx.job.findUniqueOrThrow({
      where: { id: jobId },
      select: { attempt: true, cursor: true, kind: true, queue: true, tenantId: true, total: true, processed: true, failed: true },
    });
    await tx.jobEvent.create({ data: { jobId, at: now, type: "started", attempt: row.attempt, message: `Attempt ${row.attempt} started` } });
    return { jobId, ...row };
  });
}

type ItemOutcome = { ok: true; effect: (tx: Prisma.TransactionClient) => Promise<unknown> } | { ok: false; row: number; reason: string };

/**
 * Commits one item: its effect (or its failure record) and the job's advance (processed or
 * failed, cursor, heartbeat) in one transaction, refused unless `attempt` is still current.
 */
export async function commitItem(jobId: string, attempt: number, cursor: number, outcome: ItemOutcome): Promise<void> {
  await db().$transaction(async (tx) => {
    const { count } = await tx.job.updateMany({
      where: { id: jobId, attempt, status: "running" },
      data: {
        ...(outcome.ok ? { processed: { increment: 1 } } : { failed: { increment: 1 } }),
        cursor,
        heartbeatAt: new Date(),
      },
    });
    if (count === 0) throw new AttemptFenced(jobId, attempt);
    if (outcome.ok) await outcome.effect(tx);
    else await tx.jobItemFailure.create({ data: { jobId, row: outcome.row, reason: outcome.reason.slice(0, 500), attempt } });
  });
}

/** Ends a run with a terminal status and the message a person reads, if the attempt is still current. */
export async function finishJob(jobId: string, attempt: number, status: JobStatus, message: string): Promise<boolean> {
  return db().$transaction(async (tx) => {
    const { count } = await tx.job.updateMany({
      where: { id: jobId, attempt, status: { in: ["running", "delayed", "queued"] } },
      data: { status, message, finishedAt: isTerminal(status) ? new Date() : null, heartbeatAt: new Date() },
    });
    if (count === 0) return false;
    await tx.jobEvent.create({ data: { jobId, type: status, attempt, message } });
    return true;
  });
}

export function countLabel(n: number, noun: string): string {
  return `${n.toLocaleString("en-US")} ${noun}${n === 1 ? "" : "s"}`;
}
