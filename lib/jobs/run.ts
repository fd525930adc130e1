import type { ResolvedBudget } from "@/lib/budgets/budgets";
import { db, type Prisma } from "@/lib/db/client";
import { metrics } from "@/lib/metrics/metrics";
import { catalogPairs } from "@/lib/queues/catalog";
import { AttemptFenced } from "./errors";
import { nextPart, queuePart, type SplitJob } from "./parts";
import { finalizeStatement, finalMessageStatement, finalRowOf, type FinalizedRow, type FinalRow } from "./finalize-statement";
import { countLabel, nounOf, progressPhrase } from "./messages";
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

/** A budget to write on a row of this queue and kind. */
interface PairBudget {
  queue: string;
  kind: string;
  softMs: number;
  hardMs: number;
  source: string;
}

/** Per resolver: resolving every pair costs more CPU than the rest of a start, and the answers never change. */
const catalogBudgetsOf = new WeakMap<(queue: string, kind: string) => ResolvedBudget, PairBudget[]>();

/**
 * The budget of every (queue, kind) the catalog runs, so the start statement can pick the row's
 * without a read first. A pair whose resolution fails is left out: a row of that pair takes the
 * path that resolves it alone, where the failure surfaces before anything is written.
 */
function catalogBudgets(resolve: (queue: string, kind: string) => ResolvedBudget): PairBudget[] {
  const cached = catalogBudgetsOf.get(resolve);
  if (cached) return cached;
  const budgets: PairBudget[] = [];
  for (const { queue, kind } of catalogPairs()) {
    try {
      const { softMs, hardMs, source } = resolve(queue, kind);
      budgets.push({ queue, kind, softMs, hardMs, source });
    } catch {
      // Left out on purpose (see above).
    }
  }
  catalogBudgetsOf.set(resolve, budgets);
  return budgets;
}

/**
 * Starts a new attempt: the attempt number goes up (fencing every older run), the row is
 * `running` with the budget this worker really uses, and its "started" timeline event is
 * written — all in one statement. Returns null for a job that is already terminal or no longer
 * exists. `resolveBudget` must give the same answer for a pair every time within the process
 * (as `resolveBudget` of lib/budgets does: its environment is read once): its answers are kept.
 */
export async function startAttempt(
  jobId: string,
  now = new Date(),
  resolveBudget?: (queue: string, kind: string) => ResolvedBudget,
): Promise<RunStart | null> {
  if (!resolveBudget) return startStatement(jobId, now, null);
  const started = await startStatement(jobId, now, catalogBudgets(resolveBudget));
  if (started) return started;
  // Terminal, gone, or a queue and kind the catalog does not list (or whose resolution failed):
  // read the pair and resolve it here — a resolution that throws writes nothing.
  const rows = await db().$queryRaw<{ queue: string; kind: string; status: JobStatus }[]>`
    SELECT queue, kind, status FROM "Job" WHERE id = ${jobId}::uuid`;
  const row = rows[0];
  if (!row || isTerminal(row.status)) return null;
  const { softMs, hardMs, source } = resolveBudget(row.queue, row.kind);
  return startStatement(jobId, now, [{ queue: row.queue, kind: row.kind, softMs, hardMs, source }]);
}

/**
 * The start in one round trip. With `budgets`, only a row whose (queue, kind) is among them
 * starts, and it takes that budget unless an operator set one; with null, the row keeps its
 * budget. The event's seconds are formatted as `formatSeconds` does.
 */
async function startStatement(jobId: string, now: Date, budgets: PairBudget[] | null): Promise<RunStart | null> {
  const at = now.toISOString();
  const list = budgets ?? [];
  const rows = await db().$queryRaw<Omit<RunStart, "jobId">[]>`
    WITH budget AS (
      SELECT * FROM unnest(${list.map((b) => b.queue)}::text[], ${list.map((b) => b.kind)}::text[], ${list.map((b) => b.softMs)}::int[],
                           ${list.map((b) => b.hardMs)}::int[], ${list.map((b) => b.source)}::text[]) AS b(queue, kind, "softMs", "hardMs", source)
    ), started AS (
      -- One atomic increment under the row lock: two runs started at once get different attempts.
      UPDATE "Job" j
      SET attempt = j.attempt + 1, status = 'running', message = NULL,
          "heartbeatAt" = ${at}::timestamptz AT TIME ZONE 'UTC', "attemptStartedAt" = ${at}::timestamptz AT TIME ZONE 'UTC',
          "startedAt" = coalesce(j."startedAt", ${at}::timestamptz AT TIME ZONE 'UTC'), "updatedAt" = now() AT TIME ZONE 'UTC',
          "budgetSoftMs" = CASE WHEN starts_with(j."budgetSource", ${OPERATOR_BUDGET_PREFIX}) THEN j."budgetSoftMs"
            ELSE coalesce((SELECT b."softMs" FROM budget b WHERE b.queue = j.queue AND b.kind = j.kind), j."budgetSoftMs") END,
          "budgetHardMs" = CASE WHEN starts_with(j."budgetSource", ${OPERATOR_BUDGET_PREFIX}) THEN j."budgetHardMs"
            ELSE coalesce((SELECT b."hardMs" FROM budget b WHERE b.queue = j.queue AND b.kind = j.kind), j."budgetHardMs") END,
          "budgetSource" = CASE WHEN starts_with(j."budgetSource", ${OPERATOR_BUDGET_PREFIX}) THEN j."budgetSource"
            ELSE coalesce((SELECT b.source FROM budget b WHERE b.queue = j.queue AND b.kind = j.kind), j."budgetSource") END
      WHERE j.id = ${jobId}::uuid AND j.status::text <> ALL(${[...TERMINAL_STATUSES]})
        AND (${budgets === null} OR EXISTS (SELECT 1 FROM budget b WHERE b.queue = j.queue AND b.kind = j.kind))
      RETURNING j.attempt, j.cursor, j.kind, j.queue, j."tenantId", j."parentId", j.total, j.processed, j.failed, j.params,
                j."budgetSoftMs", j."budgetHardMs", j."budgetSource", j."slotMsUsed"
    ), event AS (
      INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
      SELECT ${jobId}::uuid, ${at}::timestamptz AT TIME ZONE 'UTC', 'started', attempt,
             'Attempt ' || attempt || ' started (budget ' || to_char(round("budgetSoftMs" / 1000.0), 'FM999,999,999,990') || ' s soft, '
               || to_char(round("budgetHardMs" / 1000.0), 'FM999,999,999,990') || ' s hard, ' || "budgetSource" || ')'
      FROM started
    )
    SELECT * FROM started`;
  const row = rows[0];
  return row ? { jobId, ...row } : null;
}

export type ItemOutcome = { ok: true; effect: (tx: Prisma.TransactionClient) => Promise<unknown> } | { ok: false; row: number; reason: string };

/** One item to commit: its number (counted like the cursor: 1 is the job's first, or its range's) and what it did. */
export interface ItemCommit {
  item: number;
  outcome: ItemOutcome;
}

/**
 * Commits one item: its effect (or its failure record), the record that this item is done, and
 * the job's advance (processed or failed, cursor, heartbeat) in one transaction, refused unless
 * `attempt` is still current. See `commitItems`.
 */
export async function commitItem(jobId: string, attempt: number, item: number, outcome: ItemOutcome, parentId?: string | null, cursor = item): Promise<void> {
  await commitItems(jobId, attempt, [{ item, outcome }], parentId, cursor);
}

/**
 * Commits items together: their effects (or failure records), a `JobItem` row per item, and the
 * job's advance in one transaction, refused (`AttemptFenced`) unless `attempt` is still current
 * and the row running. Items finishing side by side are committed as a group because every
 * commit of a job takes its row's lock: one transaction for many items is what lets a job commit
 * hundreds of items a second. The `JobItem` row (unique per job and item) makes each effect
 * exactly-once: a second commit of an item fails as a whole and writes nothing. `cursor` is the
 * contiguous low watermark these commits complete (it never moves back). A part of a split job
 * advances the counts of the job it was split from in the same transaction, so the original job
 * (and its customer's progress page) shows the parts' aggregate.
 */
export async function commitItems(jobId: string, attempt: number, items: readonly ItemCommit[], parentId: string | null | undefined, cursor: number): Promise<void> {
  if (items.length === 0) return;
  const ok = items.filter((i) => i.outcome.ok).length;
  const bad = items.length - ok;
  await db().$transaction(async (tx) => {
    const advanced = await tx.$executeRaw`
      UPDATE "Job" SET processed = processed + ${ok}::int, failed = failed + ${bad}::int,
             cursor = greatest(cursor, ${cursor}::int), "heartbeatAt" = now() AT TIME ZONE 'UTC', "updatedAt" = now() AT TIME ZONE 'UTC'
      WHERE id = ${jobId}::uuid AND attempt = ${attempt}::int AND status = 'running'`;
    if (advanced === 0) throw new AttemptFenced(jobId, attempt);
    await tx.$executeRaw`
      INSERT INTO "JobItem" ("jobId", item, attempt, ok)
      SELECT ${jobId}::uuid, item, ${attempt}::int, ok FROM unnest(${items.map((i) => i.item)}::int[], ${items.map((i) => i.outcome.ok)}::boolean[]) AS t(item, ok)`;
    if (parentId) {
      await tx.$executeRaw`
        UPDATE "Job" SET processed = processed + ${ok}::int, failed = failed + ${bad}::int,
               "heartbeatAt" = now() AT TIME ZONE 'UTC', "updatedAt" = now() AT TIME ZONE 'UTC'
        WHERE id = ${parentId}::uuid`;
    }
    const failures: { jobId: string; row: number; reason: string; attempt: number }[] = [];
    for (const { outcome } of items) {
      if (outcome.ok) await outcome.effect(tx);
      else failures.push({ jobId, row: outcome.row, reason: outcome.reason.slice(0, 500), attempt });
    }
    if (failures.length > 0) await tx.jobItemFailure.createMany({ data: failures });
  });
}

/**
 * The items of a job committed after `from` (and up to `to`): above its cursor, by earlier runs
 * that stopped with items in flight, so a resume skips them; or, for a part of a split job, the
 * items of its range the job it was split from had already committed.
 */
export async function committedItems(jobId: string, from: number, to = 2 ** 31 - 1): Promise<number[]> {
  const rows = await db().$queryRaw<{ item: number }[]>`
    SELECT item FROM "JobItem" WHERE "jobId" = ${jobId}::uuid AND item > ${from}::int AND item <= ${to}::int`;
  return rows.map((r) => r.item);
}

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
export async function handOver(jobId: string, attempt: number, committedThisRun: number, kind: string): Promise<boolean> {
  return db().$transaction(async (tx) => {
    const { count } = await tx.job.updateMany({
      where: { id: jobId, attempt, status: "running" },
      data: { status: "queued", message: "The service was busier than expected, so the rest continues in a fresh turn, where it stopped." },
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

/** Proof of life for a run between item commits (a long model call, a slow page). */
export async function heartbeat(jobId: string, attempt: number): Promise<boolean> {
  const { count } = await db().job.updateMany({ where: { id: jobId, attempt, status: "running" }, data: { heartbeatAt: new Date() } });
  return count > 0;
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
  const rows = await db().$queryRawUnsafe<FinalizedRow[]>(statement.text, ...statement.values);
  const row = rows[0];
  if (!row) return null;
  const status = row.status as JobStatus;
  if (!row.written) {
    const message = typeof f.message === "function" ? f.message(finalRowOf(row)) : f.message;
    const follow = finalMessageStatement(jobId, attempt, status, message);
    await db().$executeRawUnsafe(follow.text, ...follow.values);
  }
  if (isTerminal(status)) {
    metrics.jobsFinished.inc({ kind: row.kind, status });
    // The last part to end ends the job it was split from; every part's end updates its message.
    if (row.parentId) await settleParent(row.parentId);
  }
  return status;
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
    if (!parent || parent.status !== "running") return null;
    const groups = await tx.job.groupBy({ by: ["status"], where: { parentId }, _count: { _all: true } });
    const count = (statuses: readonly JobStatus[]) => groups.filter((g) => statuses.includes(g.status)).reduce((n, g) => n + g._count._all, 0);
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
