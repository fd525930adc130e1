import type { ResolvedBudget } from "@/lib/budgets/budgets";
import { db, poolQuery, Prisma } from "@/lib/db/client";
import { catalogPairs } from "@/lib/catalog/catalog";
import { isTerminal, TERMINAL_STATUSES, type JobStatus } from "@/lib/core/job-statuses";
import { REQUEST_EVENT, RETRY_EVENT } from "@/lib/core/cancel-events";

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
  /**
   * What the projection at the start needs of the row beyond its counts, read by the start
   * statement itself so that the projection costs no round trip of its own: whether the job sent
   * rows to the batch service, and the bytes an item of its upload holds (a part's: its source's).
   * Absent when the run was started another way; the projection then reads them.
   */
  sentToBatch?: boolean;
  itemBytes?: number | null;
  /**
   * The message of the job's open cancel request (its newest request event, with no retry after
   * it), null without one: read by the start statement so the check before any work costs no
   * round trip (./cancel-request.ts). Absent when the run was started another way.
   */
  cancelRequest?: string | null;
  /**
   * True when this run resumes a job that gave its slot back (its row was `delayed`: a rate-limit
   * window, an outside service that was down, a batch not done yet): the attempt goes on — same
   * number, no "started" event, no new projection. Any other start is a new attempt.
   */
  resumed?: boolean;
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
 * Starts a run: the row is `running` with the budget this worker really uses — in one statement.
 * A job that gave its slot back (`delayed`) resumes its attempt: the run that deferred it ended
 * before it did, so there is nothing to fence. Any other start is a new attempt: the attempt
 * number goes up (fencing every older run: a crashed worker's, a stalled one's) and its "started"
 * timeline event is written. Returns null for a job that is already terminal or no longer exists.
 * `resolveBudget` must give the same answer for a pair every time within the process
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
  const statement = Prisma.sql`
    WITH budget AS (
      SELECT * FROM unnest(${list.map((b) => b.queue)}::text[], ${list.map((b) => b.kind)}::text[], ${list.map((b) => b.softMs)}::int[],
                           ${list.map((b) => b.hardMs)}::int[], ${list.map((b) => b.source)}::text[]) AS b(queue, kind, "softMs", "hardMs", source)
    ), before AS (
      -- The row as it was, locked: two runs started at once get different attempts (one increment
      -- each, under the lock), and a resume from delayed keeps its attempt.
      SELECT status = 'delayed' AS resumed FROM "Job" WHERE id = ${jobId}::uuid FOR UPDATE
    ), started AS (
      UPDATE "Job" j
      SET attempt = CASE WHEN before.resumed THEN j.attempt ELSE j.attempt + 1 END, status = 'running', message = NULL,
          "heartbeatAt" = ${at}::timestamptz AT TIME ZONE 'UTC', "attemptStartedAt" = ${at}::timestamptz AT TIME ZONE 'UTC',
          "startedAt" = coalesce(j."startedAt", ${at}::timestamptz AT TIME ZONE 'UTC'), "updatedAt" = now() AT TIME ZONE 'UTC',
          "budgetSoftMs" = CASE WHEN starts_with(j."budgetSource", ${OPERATOR_BUDGET_PREFIX}) THEN j."budgetSoftMs"
            ELSE coalesce((SELECT b."softMs" FROM budget b WHERE b.queue = j.queue AND b.kind = j.kind), j."budgetSoftMs") END,
          "budgetHardMs" = CASE WHEN starts_with(j."budgetSource", ${OPERATOR_BUDGET_PREFIX}) THEN j."budgetHardMs"
            ELSE coalesce((SELECT b."hardMs" FROM budget b WHERE b.queue = j.queue AND b.kind = j.kind), j."budgetHardMs") END,
          "budgetSource" = CASE WHEN starts_with(j."budgetSource", ${OPERATOR_BUDGET_PREFIX}) THEN j."budgetSource"
            ELSE coalesce((SELECT b.source FROM budget b WHERE b.queue = j.queue AND b.kind = j.kind), j."budgetSource") END
      FROM before
      WHERE j.id = ${jobId}::uuid AND j.status::text <> ALL(${[...TERMINAL_STATUSES]})
        AND (${budgets === null} OR EXISTS (SELECT 1 FROM budget b WHERE b.queue = j.queue AND b.kind = j.kind))
      RETURNING before.resumed, j.attempt, j.cursor, j.kind, j.queue, j."tenantId", j."parentId", j.total, j.processed, j.failed, j.params,
                j."budgetSoftMs", j."budgetHardMs", j."budgetSource", j."slotMsUsed",
                EXISTS (SELECT 1 FROM "JobBatch" jb WHERE jb."jobId" = j.id) AS "sentToBatch",
                (SELECT u."sizeBytes"::float8 / src.total FROM "Job" src JOIN "Upload" u ON u."jobId" = src.id
                 WHERE src.id = coalesce(j."parentId", j.id) AND src.total > 0) AS "itemBytes",
                (SELECT CASE WHEN e.type = ${REQUEST_EVENT} THEN e.message END FROM "JobEvent" e
                 WHERE e."jobId" = j.id AND e.type IN (${REQUEST_EVENT}, ${RETRY_EVENT}) ORDER BY e.id DESC LIMIT 1) AS "cancelRequest"
    ), event AS (
      INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
      SELECT ${jobId}::uuid, ${at}::timestamptz AT TIME ZONE 'UTC', 'started', attempt,
             'Attempt ' || attempt || ' started (budget ' || to_char(round("budgetSoftMs" / 1000.0), 'FM999,999,999,990') || ' s soft, '
               || to_char(round("budgetHardMs" / 1000.0), 'FM999,999,999,990') || ' s hard, ' || "budgetSource" || ')'
      FROM started WHERE NOT resumed
    )
    SELECT * FROM started`;
  const [row] = await poolQuery<Omit<RunStart, "jobId">>(statement.text, statement.values);
  return row ? { jobId, ...row } : null;
}
