import { db, type Prisma } from "@/lib/db/client";
import { metrics } from "@/lib/metrics/metrics";
import type { ResolvedBudget } from "@/lib/budgets/budgets";
import { KINDS, type JobKind } from "@/lib/queues/catalog";
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
  /** The job this one is a part of, when it came from a split. */
  parentId: string | null;
  total: number | null;
  processed: number;
  failed: number;
  params: Prisma.JsonValue;
  budgetSoftMs: number;
  budgetHardMs: number;
  budgetSource: string;
  /** Production ms earlier runs spent in a worker slot (a rescheduled job carries them over). */
  slotMsUsed: number;
}

/** Budgets an operator set for a retry stay as they are; all others are what this worker resolves. */
export const OPERATOR_BUDGET_PREFIX = "operator:";

/**
 * Starts a new attempt: the attempt number goes up (fencing every older run), the row is
 * `running` with the budget this worker really uses. Returns null for a job that is already
 * terminal or no longer exists.
 */
export async function startAttempt(
  jobId: string,
  now = new Date(),
  resolveBudget?: (queue: string, kind: string) => ResolvedBudget,
): Promise<RunStart | null> {
  return db().$transaction(async (tx) => {
    // One atomic increment under the row lock: two runs started at once get different attempts.
    const { count } = await tx.job.updateMany({
      where: { id: jobId, status: { notIn: [...TERMINAL_STATUSES] } },
      data: { attempt: { increment: 1 }, status: "running", message: null, heartbeatAt: now, attemptStartedAt: now },
    });
    if (count === 0) return null;
    await tx.job.updateMany({ where: { id: jobId, startedAt: null }, data: { startedAt: now } });
    if (resolveBudget) {
      const { queue, kind } = await tx.job.findUniqueOrThrow({ where: { id: jobId }, select: { queue: true, kind: true } });
      const budget = resolveBudget(queue, kind);
      await tx.job.updateMany({
        where: { id: jobId, NOT: { budgetSource: { startsWith: OPERATOR_BUDGET_PREFIX } } },
        data: { budgetSoftMs: budget.softMs, budgetHardMs: budget.hardMs, budgetSource: budget.source },
      });
    }
    const row = await tx.job.findUniqueOrThrow({
      where: { id: jobId },
      select: {
        attempt: true,
        cursor: true,
        kind: true,
        queue: true,
        tenantId: true,
        parentId: true,
        total: true,
        processed: true,
        failed: true,
        params: true,
        budgetSoftMs: true,
        budgetHardMs: true,
        budgetSource: true,
        slotMsUsed: true,
      },
    });
    await tx.jobEvent.create({
      data: {
        jobId,
        at: now,
        type: "started",
        attempt: row.attempt,
        message: `Attempt ${row.attempt} started (budget ${fmtSeconds(row.budgetSoftMs)} soft, ${fmtSeconds(row.budgetHardMs)} hard, ${row.budgetSource})`,
      },
    });
    return { jobId, ...row };
  });
}

type ItemOutcome = { ok: true; effect: (tx: Prisma.TransactionClient) => Promise<unknown> } | { ok: false; row: number; reason: string };

/**
 * Commits one item: its effect (or its failure record) and the job's advance (processed or
 * failed, cursor, heartbeat) in one transaction, refused unless `attempt` is still current. A
 * part of a split job advances the counts of the job it was split from in the same transaction,
 * so the original job (and its customer's progress page) shows the parts' aggregate.
 */
export async function commitItem(jobId: string, attempt: number, cursor: number, outcome: ItemOutcome, parentId?: string | null): Promise<void> {
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
    if (parentId) {
      await tx.job.updateMany({
        where: { id: parentId },
        data: { ...(outcome.ok ? { processed: { increment: 1 } } : { failed: { increment: 1 } }), heartbeatAt: new Date() },
      });
    }
    if (outcome.ok) await outcome.effect(tx);
    else await tx.jobItemFailure.create({ data: { jobId, row: outcome.row, reason: outcome.reason.slice(0, 500), attempt } });
  });
}

/** A run interrupted by its worker stopping goes back to the queue, if its attempt still owns the row. */
export async function handBack(jobId: string, attempt: number): Promise<boolean> {
  const { count } = await db().job.updateMany({
    where: { id: jobId, attempt, status: "running" },
    data: { status: "queued", message: "Interrupted by a worker restart; it will resume where it stopped." },
  });
  return count > 0;
}

/** Proof of life for a run between item commits (a long model call, a slow page). */
export async function heartbeat(jobId: string, attempt: number): Promise<boolean> {
  const { count } = await db().job.updateMany({ where: { id: jobId, attempt, status: "running" }, data: { heartbeatAt: new Date() } });
  return count > 0;
}

/** The row as a finalizer sees it, read under its lock. */
export interface FinalRow {
  kind: string;
  total: number | null;
  processed: number;
  failed: number;
  cursor: number;
  budgetSoftMs: number;
  budgetHardMs: number;
}

export interface Finalization {
  /** The status to write; `completed` becomes `completed_with_errors` when any item failed. */
  status: JobStatus;
  /** What a person reads; built from the row as finalized, so the counts it names are the committed ones. */
  message: string | ((row: FinalRow) => string);
  /** Only a row in one of these statuses is finalized. */
  from?: readonly JobStatus[];
  result?: Prisma.InputJsonValue;
}

/**
 * Ends a run, if `attempt` is still current and the row is in one of `from`. The status flips in
 * one statement (fencing every later commit of this attempt at once); the message and its
 * timeline event follow in a second. Two round trips, no interactive transaction: the deadline
 * path must stay fast on a busy database. Returns the status written, or null when the row was
 * not this attempt's to finalize.
 */
export async function finalizeJob(jobId: string, attempt: number, f: Finalization): Promise<JobStatus | null> {
  const from = [...(f.from ?? ["running", "delayed", "queued"])];
  const terminal = isTerminal(f.status);
  const rows = await db().$queryRaw<(FinalRow & { status: JobStatus; parentId: string | null })[]>`
    UPDATE "Job"
    SET status = (CASE WHEN ${f.status} = 'completed' AND failed > 0 THEN 'completed_with_errors' ELSE ${f.status} END)::"JobStatus",
        "finishedAt" = CASE WHEN ${terminal} THEN now() AT TIME ZONE 'UTC' ELSE NULL END,
        "heartbeatAt" = now() AT TIME ZONE 'UTC',
        "updatedAt" = now() AT TIME ZONE 'UTC'
    WHERE id = ${jobId}::uuid AND attempt = ${attempt} AND status::text = ANY(${from})
    RETURNING status, kind, total, processed, failed, cursor, "budgetSoftMs", "budgetHardMs", "parentId"`;
  const row = rows[0];
  if (!row) return null;
  const message = typeof f.message === "function" ? f.message(row) : f.message;
  const result = f.result === undefined ? null : JSON.stringify(f.result);
  await db().$executeRaw`
    WITH updated AS (
      UPDATE "Job" SET message = ${message}, result = coalesce(${result}::jsonb, result)
      WHERE id = ${jobId}::uuid AND attempt = ${attempt} RETURNING id
    )
    INSERT INTO "JobEvent" ("jobId", type, attempt, message, at)
    SELECT id, ${row.status}, ${attempt}, ${message}, now() AT TIME ZONE 'UTC' FROM updated`;
  if (isTerminal(row.status)) {
    metrics.jobsFinished.inc({ kind: row.kind, status: row.status });
    // The last part to end ends the job it was split from; every part's end updates its message.
    if (row.parentId) await settleParent(row.parentId);
  }
  return row.status;
}

/** Which child status the parent takes when its parts did not all complete: the worst one. */
const PART_SEVERITY: readonly JobStatus[] = ["failed", "killed", "abandoned", "timed_out", "cancelled"];

const PART_OUTCOME: Partial<Record<JobStatus, string>> = {
  failed: "failed",
  killed: "were stopped at the hard limit",
  abandoned: "were abandoned",
  timed_out: "timed out",
  cancelled: "were cancelled",
};

/**
 * Brings a split job up to date with its parts: while any part is open its message counts them;
 * when the last one ends, the job ends — `completed` (or `completed_with_errors`) when every part
 * completed, otherwise the worst status among them, so a failed part never leaves it waiting.
 * Runs under the parent's row lock, so parts ending at once settle it one after the other; the
 * final write goes through `finalizeJob` (one status flip: settled exactly once).
 */
export async function settleParent(parentId: string): Promise<JobStatus | null> {
  const decision = await db().$transaction(async (tx) => {
    const locked = await tx.$queryRaw<{ attempt: number; status: JobStatus; kind: string }[]>`
      SELECT attempt, status, kind FROM "Job" WHERE id = ${parentId}::uuid FOR UPDATE`;
    const parent = locked[0];
    if (!parent || parent.status !== "running") return null;
    const groups = await tx.job.groupBy({ by: ["status"], where: { parentId }, _count: { _all: true } });
    const count = (statuses: readonly JobStatus[]) => groups.filter((g) => statuses.includes(g.status)).reduce((n, g) => n + g._count._all, 0);
    const parts = count(groups.map((g) => g.status));
    if (parts === 0) return null;
    const open = count(["queued", "running", "delayed"]);
    const done = count(["completed", "completed_with_errors"]);
    if (open > 0) {
      await tx.job.update({
        where: { id: parentId },
        data: { message: `Split into ${parts} parts: ${done} completed, ${open} still running or queued${parts - open - done > 0 ? `, ${parts - open - done} ended without finishing` : ""}.` },
      });
      return null;
    }
    const worst = PART_SEVERITY.find((s) => count([s]) > 0);
    return { attempt: parent.attempt, parts, done, worst: worst ?? null, worstCount: worst ? count([worst]) : 0 };
  });
  if (!decision) return null;
  const { attempt, parts, done, worst, worstCount } = decision;
  return finalizeJob(parentId, attempt, {
    status: worst ?? "completed",
    from: ["running"],
    message: (row) => {
      const noun = nounOf(row.kind);
      if (!worst) {
        const failed = row.failed > 0 ? `; ${countLabel(row.failed, noun)} failed (see the list)` : "";
        return `Finished in ${parts} parts: ${progressPhrase(row)} done${failed}.`;
      }
      return `${worstCount} of ${parts} parts ${PART_OUTCOME[worst]} (${done} completed); ${progressPhrase(row)} done. Retry those parts from the job page.`;
    },
  });
}

/** Ends a run with a terminal status and the message a person reads, if the attempt is still current. */
export async function finishJob(jobId: string, attempt: number, status: JobStatus, message: string): Promise<boolean> {
  return (await finalizeJob(jobId, attempt, { status, message })) !== null;
}

export function countLabel(n: number, noun: string): string {
  return `${n.toLocaleString("en-US")} ${noun}${n === 1 ? "" : "s"}`;
}

export function fmtSeconds(ms: number): string {
  return `${Math.round(ms / 1000).toLocaleString("en-US")} s`;
}

export function nounOf(kind: string): string {
  return KINDS[kind as JobKind]?.noun ?? "item";
}

/** "340 of 1,772 rows", from the committed counts. */
export function progressPhrase(row: Pick<FinalRow, "kind" | "total" | "processed" | "failed">): string {
  const done = row.processed + row.failed;
  const noun = nounOf(row.kind);
  return row.total !== null ? `${done.toLocaleString("en-US")} of ${countLabel(row.total, noun)}` : countLabel(done, noun);
}
