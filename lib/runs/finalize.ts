import { db, poolQuery, type Prisma } from "@/lib/db/client";
import { metrics } from "@/lib/metrics/metrics";
import { nextPart, queuePart, type SplitJob } from "@/lib/jobs/parts";
import { countLabel, finalRowOf, nounOf, progressPhrase, type FinalRow } from "@/lib/jobs/messages";
import { isTerminal, type JobStatus } from "@/lib/core/job-statuses";
import { finalizeStatement, finalMessageStatement, type FinalizedRow } from "./finalize-statement";

/** A run interrupted by its worker stopping goes back to the queue, if its attempt still owns the row. */
export async function handBack(jobId: string, attempt: number): Promise<boolean> {
  const { count } = await db().job.updateMany({
    where: { id: jobId, attempt, status: "running" },
    data: { status: "queued", message: "Interrupted by a worker restart; it will resume where it stopped." },
  });
  return count > 0;
}

/**
 * A run that ended its slice with items left (`SliceEnded`) goes back to the queue for a new
 * attempt with a fresh budget, if its attempt still owns the row; its timeline says why.
 */
export async function handOver(
  jobId: string,
  attempt: number,
  committedThisRun: number,
  kind: string,
): Promise<boolean> {
  return db().$transaction(async (tx) => {
    const { count } = await tx.job.updateMany({
      where: { id: jobId, attempt, status: "running" },
      data: {
        status: "queued",
        message: "The service was busier than expected, so the rest continues in a fresh turn, where it stopped.",
      },
    });
    if (count === 0) return false;
    await tx.jobEvent.create({
      data: {
        jobId,
        type: "handed_over",
        attempt,
        message: `Slice ended with ${countLabel(committedThisRun, nounOf(kind))} done in it and more left (the provider was busier than projected): the rest continues in a new attempt with a fresh budget.`,
      },
    });
    return true;
  });
}

export interface Finalization {
  /** The status to write; `completed` becomes `completed_with_errors` when any item failed. */
  status: JobStatus;
  /** What a person reads; built from the row as finalized, so the counts it names are the committed ones. */
  message: string | ((row: FinalRow) => string);
  /** Only a row in one of these statuses is finalized. */
  from?: readonly JobStatus[];
  result?: Prisma.InputJsonValue;
  /**
   * The row as the caller last knew it (a run's start, say). When the row is still exactly that,
   * a message function is evaluated on it and written in the finalizing statement itself;
   * otherwise it is evaluated on the row as finalized and written by a second statement.
   */
  known?: FinalRow;
}

/**
 * Ends a run, if `attempt` is still current and the row is in one of `from`. One statement
 * flips the status (fencing every later commit of this attempt at once) and, when the message is
 * known by then — a string, or a function of a `known` row that is still current — writes it
 * and the timeline event too. A message that needs the row as finalized follows in a second
 * statement. No interactive transaction: the deadline path must stay fast on a busy database.
 * Returns the status written, or null when the row was not this attempt's to finalize.
 */
export async function finalizeJob(jobId: string, attempt: number, f: Finalization): Promise<JobStatus | null> {
  return (await finalizeJobRow(jobId, attempt, f))?.status ?? null;
}

/** `finalizeJob`, returning the row as finalized (its counts, for the queue job's copy) instead of its status alone. */
export async function finalizeJobRow(
  jobId: string,
  attempt: number,
  f: Finalization,
): Promise<(FinalRow & { status: JobStatus }) | null> {
  const early = earlyMessage(f);
  const statement = finalizeStatement({
    jobId,
    attempt,
    status: f.status,
    terminal: isTerminal(f.status),
    from: f.from ?? ["running", "delayed", "queued"],
    result: f.result === undefined ? null : JSON.stringify(f.result),
    early,
  });
  const [row] = await poolQuery<FinalizedRow>(statement.text, statement.values);
  if (!row) return null;
  const status = row.status as JobStatus;
  if (!row.written) {
    const message = typeof f.message === "function" ? f.message(finalRowOf(row)) : f.message;
    const follow = finalMessageStatement(jobId, attempt, status, message);
    await poolQuery(follow.text, follow.values);
  }
  if (isTerminal(status)) {
    metrics.jobsFinished.inc({ kind: row.kind, status });
    // The last part to end ends the job it was split from; every part's end updates its message.
    if (row.parentId) await settleParent(row.parentId);
  }
  return { ...finalRowOf(row), status };
}

/** The message when it can be known before the statement, and the row it assumes (none for a string). */
function earlyMessage(f: Finalization): { message: string; known?: FinalRow } | null {
  if (typeof f.message === "string") return { message: f.message };
  if (!f.known) return null;
  const known = finalRowOf(f.known);
  return { message: f.message(known), known };
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
 * Brings a split job up to date with its parts. Parts run one after another: when the last part
 * made so far has completed, the next planned one is made and queued; when every planned part has
 * completed, the job ends `completed` (or `completed_with_errors`); when a part ended otherwise,
 * the job takes the worst status among its parts, so a failed part never leaves it waiting (a
 * retry of that part reopens it, and the parts after it follow when it completes). Runs under the
 * job's row lock, so parts ending at once settle it one after the other; the final write goes
 * through `finalizeJob` (one status flip: settled exactly once).
 */
export async function settleParent(parentId: string): Promise<JobStatus | null> {
  const decision = await db().$transaction(async (tx) => {
    const locked = await tx.$queryRaw<(FinalRow & SplitJob & { attempt: number; status: JobStatus })[]>`
      SELECT id::text AS id, attempt, status, kind, queue, "tenantId"::text AS "tenantId", params, total, processed, failed, cursor, "budgetSoftMs", "budgetHardMs"
      FROM "Job" WHERE id = ${parentId}::uuid FOR UPDATE`;
    const parent = locked[0];
    if (parent?.status !== "running") return null;
    const groups = await tx.job.groupBy({ by: ["status"], where: { parentId }, _count: { _all: true } });
    const count = (statuses: readonly JobStatus[]) =>
      groups.filter((g) => statuses.includes(g.status)).reduce((n, g) => n + g._count._all, 0);
    const parts = count(groups.map((g) => g.status));
    if (parts === 0 || count(["queued", "running", "delayed"]) > 0) return null;
    const done = count(["completed", "completed_with_errors"]);
    const worst = PART_SEVERITY.find((s) => count([s]) > 0);
    if (!worst) {
      const next = await nextPart(tx, parent, parts);
      if (next) return { type: "next" as const, parent, next };
    }
    return { type: "end" as const, parent, parts, done, worst: worst ?? null, worstCount: worst ? count([worst]) : 0 };
  });
  if (!decision) return null;
  if (decision.type === "next") {
    await queuePart(decision.parent, decision.next);
    return null;
  }
  const { parent, parts, done, worst, worstCount } = decision;
  return finalizeJob(parentId, parent.attempt, {
    status: worst ?? "completed",
    from: ["running"],
    // Every part has ended, so the counts read under the lock are normally the final ones.
    known: parent,
    message: (row) => {
      const noun = nounOf(row.kind);
      if (!worst) {
        const failed = row.failed > 0 ? `; ${countLabel(row.failed, noun)} could not be processed (see the list)` : "";
        return `Finished: ${progressPhrase(row)} done${failed}.`;
      }
      return `${worstCount} of ${parts} parts ${PART_OUTCOME[worst]} (${done} completed); ${progressPhrase(row)} done. Retry those parts from the job page.`;
    },
  });
}

/** Ends a run with a terminal status and the message a person reads, if the attempt is still current. */
export async function finishJob(jobId: string, attempt: number, status: JobStatus, message: string): Promise<boolean> {
  return (await finalizeJob(jobId, attempt, { status, message })) !== null;
}
