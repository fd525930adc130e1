import { z } from "zod";
import { db, Prisma } from "@/lib/db/client";
import { OPEN_STATUSES } from "@/lib/core/job-statuses";
import { env } from "@/lib/env";
import { pausedQueues } from "@/lib/queues/pause";
import { queue } from "@/lib/queues/queues";
import { QUEUE_NAMES, type QueueName } from "@/lib/catalog/catalog";
import { scaled } from "@/lib/time";
import type { EndCause, OperatorAction } from "./resume-policy";
import { summaryFields, summaryOf, type JobSummary, type JobSummaryRow } from "./job-summary";
import { heartbeatIntervalMs } from "@/lib/jobs/liveness";
import { listAwaitingOperator, type AwaitingJob } from "./awaiting-operator";

/**
 * The stuck rules, decided once: the stuck page and its gauges (lib/reports) read them, and the
 * operator's bulk actions (lib/actions) re-check a selection against them, so they sit below both.
 */

/**
 * Why a job is on the stuck page. One cause per job, the first that applies in this order (the
 * order of the page's sections, worst first):
 * - `awaiting_operator`: it ended, and only a person can continue it (lib/diagnosis/resume-policy.ts);
 *   nobody has acted on it yet (lib/diagnosis/awaiting-operator.ts). First: nothing else will happen to
 *   these, while the open causes below are mostly taken care of by the reaper.
 * - `lost_from_queue`: the row is open but the queue no longer holds it (missing, or finished);
 *   nothing would run it. The reaper queues it again on its next pass.
 * - `over_hard_limit`: running past its hard limit: the runtime should have stopped it.
 * - `heartbeat_lost`: running, but three heartbeats missed: its worker is probably gone.
 * - `late_start`: waiting in the queue far past its expected start (see `isLate`).
 */
export const STUCK_CAUSES = [
  "awaiting_operator",
  "lost_from_queue",
  "over_hard_limit",
  "heartbeat_lost",
  "late_start",
] as const;
export type StuckCause = (typeof STUCK_CAUSES)[number];
export const stuckCauseSchema = z.enum(STUCK_CAUSES, {
  error: (i) => `No stuck group is called "${String(i.input)}". Groups: ${STUCK_CAUSES.join(", ")}.`,
});

/** A group's bulk actions: open causes end with "mark failed"; jobs awaiting an operator are retried, or marked handled. */
export type StuckAction = "fail" | "retry" | "handle";
export const CAUSE_ACTIONS: Record<StuckCause, readonly StuckAction[]> = {
  awaiting_operator: ["retry", "handle"],
  lost_from_queue: ["fail"],
  over_hard_limit: ["fail"],
  heartbeat_lost: ["fail"],
  late_start: ["fail"],
};

/** Each group's first action. */
export const CAUSE_ACTION: Record<StuckCause, StuckAction> = {
  awaiting_operator: "retry",
  lost_from_queue: "fail",
  over_hard_limit: "fail",
  heartbeat_lost: "fail",
  late_start: "fail",
};

export const CAUSE_TITLE: Record<StuckCause, string> = {
  awaiting_operator: "Awaiting an operator",
  lost_from_queue: "Lost from the queue",
  over_hard_limit: "Running past the hard limit",
  heartbeat_lost: "Heartbeat lost",
  late_start: "Waiting far past the expected start",
};

/** Open rows compared with the queue per look (oldest first): bounds the page's queue lookups. */
const OPEN_ROWS_CHECKED = 2_000;
const QUEUE_LOOKUP_CONCURRENCY = 16;

/**
 * Expected start. A waiting job is expected to start once the queue, at the pace it kept over the
 * last `PACE_WINDOW_MS`, has started every job that was ahead of it when it was queued:
 *   expected wait = (jobs ahead of it at enqueue + 1) × (window / starts in the window).
 * "Ahead at enqueue" is the jobs queued before it that still wait plus those that started since;
 * jobs queued after it that overtook it do not count, so a job passed over (lost priority, a
 * starved tenant) becomes late while a long but moving FIFO backlog does not: there the wait
 * is what the pace explains, however many are waiting. It is late when it has waited more than
 * `LATE_FACTOR` times that and more than its kind's soft budget (the floor keeps a quiet queue's
 * first job, whose pace is noise, off the page). A queue with no start in the window explains no
 * wait: past the floor, its jobs are late. Jobs of a paused queue are never late.
 */
const PACE_WINDOW_MS = 15 * 60_000;
const LATE_FACTOR = 3;

export interface StuckGroupJob extends JobSummary {
  heartbeatAt: string | null;
  /** What BullMQ says of the queue job (`unknown`: it has none). */
  queueState: string;
  /** Production ms: how long it has been in the state that makes it stuck (waiting, running, silent). */
  ageMs: number;
  /** Production ms it was expected to wait (late starts), or the limit it passed. */
  expectedMs: number | null;
  /** Why, in words, for the row. */
  why: string;
  /** When it ended (awaiting an operator). */
  finishedAt: string | null;
  /** Awaiting an operator: why it ended, and what continues it (lib/diagnosis/resume-policy.ts). */
  endCause?: EndCause;
  action?: OperatorAction;
  /** Awaiting an operator: production ms since the customer sent it. */
  customerWaitMs?: number;
}

interface OpenRow extends JobSummaryRow {
  attemptStartedAt: Date | null;
  heartbeatAt: Date | null;
  waitingSince: Date;
  queueJobId: string | null;
}

/** What BullMQ says of a row's queue job: waiting, active, delayed, completed, failed; unknown for a queue no worker consumes; unreachable when Redis does not answer. */
export async function queueStateOf(queueName: string, id: string): Promise<string> {
  if (!(QUEUE_NAMES as string[]).includes(queueName)) return "unknown";
  return queue(queueName as QueueName)
    .getJobState(id)
    .catch(() => "unreachable");
}

async function mapLimited<T, R>(items: T[], n: number, f: (t: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      for (let i = next++; i < items.length; i = next++) out[i] = await f(items[i]!);
    }),
  );
  return out;
}

/** Open, non-split rows older than the grace (a row just created may not have its queue job yet). */
const rowGraceMs = () => Math.max(heartbeatIntervalMs(), 1000);

/**
 * The open statuses as SQL literals, not a parameter: the planner then reads the partial index on
 * the open jobs (Job_open_createdAt_idx), whose predicate names them, whatever the history holds.
 */
const OPEN_STATUS_LIST = Prisma.raw(OPEN_STATUSES.map((s) => `'${s}'`).join(", "));

async function openRows(now: Date, ids?: string[]): Promise<OpenRow[]> {
  const grace = rowGraceMs();
  const rows = await db().$queryRaw<OpenRow[]>`
    SELECT j.id, j.kind, j.queue, t.slug AS tenant, j.status, j.attempt, j.total, j.processed, j.failed,
           j."createdAt", j."attemptStartedAt", j."heartbeatAt", coalesce(j."heartbeatAt", j."createdAt") AS "waitingSince",
           j."budgetSoftMs", j."budgetHardMs", j."queueJobId"
    FROM "Job" j JOIN "Tenant" t ON t.id = j."tenantId"
    WHERE j.status IN (${OPEN_STATUS_LIST})
      AND (${ids === undefined} OR j.id = ANY(${ids ?? []}::uuid[]))
      AND j."createdAt" < (${now}::timestamptz AT TIME ZONE 'UTC') - make_interval(secs => ${grace}::float8 / 1000)
      AND NOT EXISTS (SELECT 1 FROM "Job" c WHERE c."parentId" = j.id)
    ORDER BY j."createdAt" ASC
    LIMIT ${OPEN_ROWS_CHECKED}`;
  return rows;
}

/** Per queue: when jobs started (their current attempt) since `since`, for the pace and "ahead at enqueue". */
async function startsSince(
  queues: string[],
  since: Date,
): Promise<Map<string, { createdAt: number; startedAt: number }[]>> {
  const rows = await db().$queryRaw<{ queue: string; createdAt: Date; attemptStartedAt: Date }[]>`
    SELECT queue, "createdAt", "attemptStartedAt" FROM "Job"
    WHERE queue = ANY(${queues}::text[]) AND "attemptStartedAt" >= ${since}::timestamptz AT TIME ZONE 'UTC'
    LIMIT 50000`;
  const by = new Map<string, { createdAt: number; startedAt: number }[]>();
  for (const r of rows) {
    const list = by.get(r.queue) ?? [];
    list.push({ createdAt: r.createdAt.getTime(), startedAt: r.attemptStartedAt.getTime() });
    by.set(r.queue, list);
  }
  return by;
}

export interface Classified {
  row: OpenRow;
  cause: Exclude<StuckCause, "awaiting_operator">;
  queueState: string;
  ageMs: number;
  expectedMs: number | null;
  why: string;
}

type Starts = Map<string, { createdAt: number; startedAt: number }[]>;

/** What the expected-start rule compares with: every waiting row of the queues at stake, and their recent starts. */
async function queuePace(
  rows: OpenRow[],
  paused: Map<string, { by: string; since: Date }>,
  now: Date,
  ids: string[] | undefined,
): Promise<{ waiting: OpenRow[]; windowStart: number; starts: Starts }> {
  // All waiting rows of a queue (not just the selection) decide who is ahead of whom.
  const queuedQueues = [
    ...new Set(rows.filter((r) => r.status === "queued" && !paused.has(r.queue)).map((r) => r.queue)),
  ];
  const waiting =
    ids === undefined
      ? rows.filter((r) => r.status === "queued")
      : queuedQueues.length
        ? await openRows(now).then((all) => all.filter((r) => r.status === "queued"))
        : [];
  const windowStart = now.getTime() - scaled(PACE_WINDOW_MS);
  const oldestWait = Math.min(
    windowStart,
    ...waiting.filter((r) => queuedQueues.includes(r.queue)).map((r) => r.waitingSince.getTime()),
  );
  const starts = queuedQueues.length
    ? await startsSince(queuedQueues, new Date(oldestWait))
    : new Map<string, { createdAt: number; startedAt: number }[]>();
  return { waiting, windowStart, starts };
}

/** A row the queue no longer holds (missing or finished) past the grace, as the reaper sees it; else null. */
function lostFromQueue(r: OpenRow, state: string, nowMs: number, grace: number, scale: number): Classified | null {
  // As the reaper: lost only once its last sign of life is older than the grace (a retry
  // flips the row before it queues the job again).
  const lost =
    (state === "unknown" || state === "completed" || state === "failed") && nowMs - r.waitingSince.getTime() > grace;
  if (!lost) return null;
  const age = (nowMs - r.waitingSince.getTime()) / scale;
  return {
    row: r,
    cause: "lost_from_queue",
    queueState: state,
    ageMs: age,
    expectedMs: null,
    why: `the row says ${r.status}, the queue ${state === "unknown" ? "has no job for it" : `says ${state}`}`,
  };
}

/** A running row past its hard limit, or with three heartbeats missed; else null. */
function runningStuck(r: OpenRow, state: string, nowMs: number, silence: number, scale: number): Classified | null {
  const runMs = (nowMs - (r.attemptStartedAt ?? r.createdAt).getTime()) / scale;
  if (runMs > r.budgetHardMs) {
    return {
      row: r,
      cause: "over_hard_limit",
      queueState: state,
      ageMs: runMs,
      expectedMs: r.budgetHardMs,
      why: "running past its hard limit",
    };
  }
  if (r.heartbeatAt && nowMs - r.heartbeatAt.getTime() > silence) {
    const silentMs = (nowMs - r.heartbeatAt.getTime()) / scale;
    return {
      row: r,
      cause: "heartbeat_lost",
      queueState: state,
      ageMs: silentMs,
      expectedMs: (3 * heartbeatIntervalMs()) / scale,
      why: "three heartbeats missed",
    };
  }
  return null;
}

/**
 * Classifies open rows. Exported for `markStuckJobsFailed`, which re-checks a selection against
 * the group it was shown in.
 */
export async function classifyOpenJobs(
  now = new Date(),
  ids?: string[],
): Promise<{ stuck: Classified[]; waitingInPausedQueues: number; paused: Map<string, { by: string; since: Date }> }> {
  const scale = env().BOUNDED_TIME_SCALE;
  const nowMs = now.getTime();
  const silence = 3 * heartbeatIntervalMs();
  const grace = rowGraceMs();
  const [rows, paused] = await Promise.all([openRows(now, ids), pausedQueues()]);
  const states = await mapLimited(rows, QUEUE_LOOKUP_CONCURRENCY, (r) => queueStateOf(r.queue, r.queueJobId ?? r.id));
  const { waiting, windowStart, starts } = await queuePace(rows, paused, now, ids);

  const stuck: Classified[] = [];
  let waitingInPausedQueues = 0;
  rows.forEach((r, i) => {
    const state = states[i]!;
    const lost = lostFromQueue(r, state, nowMs, grace, scale);
    if (lost) {
      stuck.push(lost);
      return;
    }
    if (r.status === "running") {
      const found = runningStuck(r, state, nowMs, silence, scale);
      if (found) stuck.push(found);
      return;
    }
    if (r.status !== "queued") return;
    if (paused.has(r.queue)) {
      waitingInPausedQueues += 1;
      return;
    }
    const late = lateness(r, nowMs, waiting, starts.get(r.queue) ?? [], windowStart, scale);
    if (late) stuck.push({ row: r, cause: "late_start", queueState: state, ...late });
  });
  return { stuck, waitingInPausedQueues, paused };
}

/** The expected-start rule (see `PACE_WINDOW_MS`); null when the job is not late. Times in production ms. */
function lateness(
  r: OpenRow,
  nowMs: number,
  waiting: OpenRow[],
  starts: { createdAt: number; startedAt: number }[],
  windowStart: number,
  scale: number,
) {
  const since = r.waitingSince.getTime();
  const waitedMs = (nowMs - since) / scale;
  if (waitedMs <= r.budgetSoftMs) return null;
  const inWindow = starts.filter((s) => s.startedAt >= windowStart).length;
  if (inWindow === 0) {
    return { ageMs: waitedMs, expectedMs: null, why: "nothing started on its queue in the last 15 min" };
  }
  const created = r.createdAt.getTime();
  const stillAhead = waiting.filter(
    (w) => w.queue === r.queue && w.id !== r.id && w.waitingSince.getTime() < since,
  ).length;
  const startedAhead = starts.filter((s) => s.createdAt < created && s.startedAt >= since).length;
  const gapMs = (nowMs - windowStart) / scale / inWindow;
  const expectedMs = (stillAhead + startedAhead + 1) * gapMs;
  if (waitedMs <= LATE_FACTOR * expectedMs) return null;
  return {
    ageMs: waitedMs,
    expectedMs,
    why: `${stillAhead + startedAhead} ahead of it when queued; its queue starts one every ${Math.max(1, Math.round(gapMs / 1000))} s`,
  };
}

/** A job awaiting an operator as a row of the stuck page. */
export function fromAwaiting(j: AwaitingJob): StuckGroupJob {
  return {
    ...summaryFields(j),
    heartbeatAt: null,
    queueState: "finished",
    ageMs: j.waitingMs,
    expectedMs: null,
    why: j.title,
    finishedAt: j.finishedAt,
    endCause: j.cause,
    action: j.action,
    customerWaitMs: j.customerWaitMs,
  };
}

export function toJob(c: Classified): StuckGroupJob {
  const r = c.row;
  return {
    ...summaryOf(r),
    heartbeatAt: r.heartbeatAt?.toISOString() ?? null,
    queueState: c.queueState,
    ageMs: c.ageMs,
    expectedMs: c.expectedMs,
    why: c.why,
    finishedAt: null,
  };
}

/**
 * The jobs of one cause right now (every one, oldest first): what a bulk action re-checks its
 * selection against, so a job that changed group meanwhile is refused rather than acted on.
 */
export async function jobsOfCause(cause: StuckCause, ids?: string[], now = new Date()): Promise<StuckGroupJob[]> {
  if (cause === "awaiting_operator") return (await listAwaitingOperator(now, ids)).map(fromAwaiting);
  const { stuck } = await classifyOpenJobs(now, ids);
  return stuck.filter((c) => c.cause === cause).map(toJob);
}
