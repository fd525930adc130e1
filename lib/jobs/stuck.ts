import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { formatDuration, formatDurationRounded } from "@/lib/format/duration";
import { queue, requeueJob } from "@/lib/queues/queues";
import { QUEUE_NAMES, type JobKind, type QueueName } from "@/lib/queues/catalog";
import { RETRY_PRIORITY, tenantPriority } from "@/lib/queues/fairness";
import { scaled } from "@/lib/time";
import { CREATE_ENQUEUE_WINDOW_MS } from "./create";
import { resumeStoppedRun } from "./crash-resume";
import { classifyOpenJobs, type StuckCause } from "./stuck-groups";
import { finalizeJob, settleParent } from "./run";
import type { JobStatus } from "./statuses";

/** How often a running job refreshes its heartbeat, in production time. */
const HEARTBEAT_MS = 30_000;
/** How often the reaper looks, in production time. */
const REAPER_INTERVAL_MS = 60_000;

/** Real-time intervals: scaled, with floors so a tiny time scale does not turn them into busy loops. */
export const heartbeatIntervalMs = () => Math.max(scaled(HEARTBEAT_MS), 500);
export const reaperIntervalMs = () => Math.max(scaled(REAPER_INTERVAL_MS), 1000);
/** A job is silent when it has missed three heartbeats. */
const silenceMs = () => 3 * heartbeatIntervalMs();
/** How long past its hard limit (since its last heartbeat) a job may stay non-terminal: one reaper interval. */
/** Candidates a reaper pass settles at once (each: one queue lookup, one statement). */
const REAP_CONCURRENCY = 8;
export const reapGraceMs = () => Math.max(reaperIntervalMs(), silenceMs());

/** Why an open job is stuck: the open causes of the stuck page (lib/jobs/stuck-groups.ts). */
export type StuckReason = Exclude<StuckCause, "reaped">;

export interface StuckJob {
  id: string;
  kind: string;
  queue: string;
  tenant: string;
  status: JobStatus;
  attempt: number;
  total: number | null;
  processed: number;
  failed: number;
  createdAt: string;
  heartbeatAt: string | null;
  budgetSoftMs: number;
  budgetHardMs: number;
  /** Production ms in the state that makes it stuck (waiting, running, silent). */
  ageMs: number;
  reasons: StuckReason[];
  /** What BullMQ says of the job: waiting, active, delayed, completed, failed, unknown… */
  queueState: string;
}

interface Row {
  id: string;
  kind: string;
  queue: string;
  status: JobStatus;
  attempt: number;
  total: number | null;
  processed: number;
  failed: number;
  budgetSoftMs: number;
  budgetHardMs: number;
  /** The queue job's id when it is not the row's (syncs: one per tenant and family). */
  queueJobId: string | null;
}

// Timestamps are stored as UTC without a time zone (Prisma's convention): raw SQL compares them
// with `now() AT TIME ZONE 'UTC'`, whatever the server's TimeZone setting.

async function queueState(queueName: string, id: string): Promise<string> {
  if (!(QUEUE_NAMES as string[]).includes(queueName)) return "unknown";
  return queue(queueName as QueueName)
    .getJobState(id)
    .catch(() => "unreachable");
}

/**
 * Open jobs that are stuck, by the stuck page's rules (one cause each), oldest first: the same
 * jobs the page groups, so the overview's count and the page's never disagree.
 */
export async function listStuckJobs(limit = 200, now = Date.now()): Promise<StuckJob[]> {
  const { stuck } = await classifyOpenJobs(new Date(now));
  return stuck.slice(0, limit).map((c) => ({
    id: c.row.id,
    kind: c.row.kind,
    queue: c.row.queue,
    tenant: c.row.tenant,
    status: c.row.status,
    attempt: c.row.attempt,
    total: c.row.total,
    processed: c.row.processed,
    failed: c.row.failed,
    createdAt: c.row.createdAt.toISOString(),
    heartbeatAt: c.row.heartbeatAt?.toISOString() ?? null,
    budgetSoftMs: c.row.budgetSoftMs,
    budgetHardMs: c.row.budgetHardMs,
    ageMs: c.ageMs,
    reasons: [c.cause],
    queueState: c.queueState,
  }));
}

/** For the `bounded_jobs_stuck{kind}` gauge: the stuck page's open groups, by kind. */
export async function countStuckByKind(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const c of (await classifyOpenJobs()).stuck) counts[c.row.kind] = (counts[c.row.kind] ?? 0) + 1;
  return counts;
}

export interface ReapedJob {
  id: string;
  kind: string;
  /** The row's status after the pass: `queued` (resumed or queued again) or `failed` (stopped at the bound). */
  status: JobStatus;
  /** What the reaper did: resumed a stopped run, queued a row the queue had lost, or ended it at the bound. */
  action: "resumed" | "requeued" | "stopped";
  message: string;
}

/**
 * The reaper's pass. No row is left for a human; each stuck row is put back to work:
 * - a `running` row whose run stopped — its queue job is gone or finished, or it is silent past
 *   its hard limit plus the grace — is resumed from its cursor under a new attempt (counted and
 *   bounded: lib/jobs/crash-resume.ts), in front of fresh jobs as a retry is
 *   (lib/queues/fairness.ts); at the bound it ends `failed` with a message a person understands.
 *   Before that, a worker that picks up the queue job BullMQ handed back takes it over the same way;
 * - a `queued` or `delayed` row whose queue job is missing or finished is queued again (BullMQ job
 *   id = the row's, so this never runs it twice). A queued row is given `CREATE_ENQUEUE_WINDOW_MS`
 *   first, so a start that is still adding its queue job is not raced.
 * A split job is never touched: it ends with its parts; one whose parts all ended without settling
 * it (its settling was interrupted) is settled here.
 */
export async function reapStuckJobs(now = new Date()): Promise<ReapedJob[]> {
  await settleStrandedParents();
  const scale = env().BOUNDED_TIME_SCALE;
  const grace = reapGraceMs();
  // Running (and delayed) rows first, in their own query: a backlog of queued rows waiting for a
  // worker must never crowd a dead run out of the pass.
  const select = (statuses: JobStatus[], silentMs: number, limit: number) => db().$queryRaw<Candidate[]>`
    SELECT j.id, j.kind, j.queue, j.status, j.attempt, j.total, j.processed, j.failed, j.cursor, j."crashResumes",
           j."tenantId"::text AS "tenantId", j."budgetSoftMs", j."budgetHardMs", j."queueJobId", coalesce(j."heartbeatAt", j."createdAt") AS "lastSign",
           coalesce(j."heartbeatAt", j."createdAt") < (${now}::timestamptz AT TIME ZONE 'UTC') - make_interval(secs => (j."budgetHardMs" * ${scale}::float8 + ${grace}) / 1000) AS "pastHard"
    FROM "Job" j
    -- Compared as the enum, not as text: a cast column cannot use the status index, and the pass
    -- would read the whole history every reaper interval.
    WHERE j.status = ANY(${statuses}::"JobStatus"[])
      AND coalesce(j."heartbeatAt", j."createdAt") < (${now}::timestamptz AT TIME ZONE 'UTC') - make_interval(secs => ${silentMs}::float8 / 1000)
      AND NOT EXISTS (SELECT 1 FROM "Job" c WHERE c."parentId" = j.id)
    ORDER BY coalesce(j."heartbeatAt", j."createdAt") ASC
    LIMIT ${limit}`;
  const candidates = [...(await select(["running", "delayed"], grace, 500)), ...(await select(["queued"], Math.max(grace, CREATE_ENQUEUE_WINDOW_MS), 200))];
  const reaped: ReapedJob[] = [];
  const reap = async (c: Candidate) => {
    const state = await queueState(c.queue, c.queueJobId ?? c.id);
    if (state === "unreachable") return;
    const lost = state === "unknown" || state === "completed" || state === "failed";
    if (c.status !== "running") {
      // Waiting for a worker or for its rate-limit window: not stuck.
      if (!lost) return;
      const done = await requeueLost(c, state);
      if (done) reaped.push(done);
      return;
    }
    // Within its limits and still held by the queue (active, or handed back by BullMQ and waiting
    // for a worker, which will take it over): not stuck yet.
    if (!lost && !c.pastHard) return;
    const why = lost
      ? `Its run stopped and the queue no longer runs it (queue state: ${state})`
      : `No sign of life for ${formatDurationRounded((now.getTime() - c.lastSign.getTime()) / scale)}, past its hard limit of ${formatDuration(c.budgetHardMs)} (its worker stopped)`;
    const r = await resumeStoppedRun(c, { requeue: true, why });
    if (r.type === "stopped") reaped.push({ id: c.id, kind: c.kind, status: "failed", action: "stopped", message: why });
    if (r.type !== "resumed") return;
    // A dead run's job goes before fresh ones, as a retry does: it had its turn (lib/queues/fairness.ts).
    await requeue(c, RETRY_PRIORITY);
    reaped.push({ id: c.id, kind: c.kind, status: "queued", action: "resumed", message: why });
  };
  // Side by side: after a worker machine dies, its dozens of rows are all due in the same pass, and
  // one at a time (a queue lookup and a statement each) the last would wait for all the others.
  const queue = [...candidates];
  await Promise.all(
    Array.from({ length: Math.min(REAP_CONCURRENCY, queue.length) }, async () => {
      for (let c = queue.shift(); c; c = queue.shift()) await reap(c);
    }),
  );
  return reaped;
}

interface Candidate extends Row {
  cursor: number;
  crashResumes: number;
  tenantId: string;
  lastSign: Date;
  pastHard: boolean;
}

/**
 * Queues again a `queued` or `delayed` row whose queue job is missing or finished: under a new
 * attempt (fencing anything that might still hold the old one), with a fresh sign of life and a
 * `requeued` event. A row that never ran takes its tenant's place in line; one that ran, the
 * front (lib/queues/fairness.ts). A row of a queue no worker consumes cannot be queued: it ends
 * `failed`, saying so.
 */
async function requeueLost(c: Candidate, state: string): Promise<ReapedJob | null> {
  if (!(QUEUE_NAMES as string[]).includes(c.queue)) {
    const message = `No worker consumes the queue “${c.queue}”, so nothing can run it.`;
    const status = await finalizeJob(c.id, c.attempt, { status: "failed", from: [c.status], message });
    return status ? { id: c.id, kind: c.kind, status, action: "stopped", message } : null;
  }
  const why = state === "unknown" ? "The queue had no job for it" : `Its queue job had ${state} while the job was ${c.status}`;
  const message = `${why}: queued again by the reaper, to continue where it stopped.`;
  const rows = await db().$queryRaw<{ attempt: number }[]>`
    WITH requeued AS (
      UPDATE "Job" SET status = 'queued', attempt = attempt + 1, message = ${message},
             "heartbeatAt" = now() AT TIME ZONE 'UTC', "updatedAt" = now() AT TIME ZONE 'UTC'
      WHERE id = ${c.id}::uuid AND attempt = ${c.attempt}::int AND status = ${c.status}::"JobStatus"
      RETURNING attempt
    ), event AS (
      INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
      SELECT ${c.id}::uuid, now() AT TIME ZONE 'UTC', 'requeued', attempt, ${message} FROM requeued
    )
    SELECT attempt FROM requeued`;
  if (rows.length === 0) return null;
  await requeue(c, c.attempt === 0 ? await tenantPriority(c.queue as QueueName, c.tenantId) : RETRY_PRIORITY);
  return { id: c.id, kind: c.kind, status: "queued", action: "requeued", message: why };
}

/**
 * Adds the queue job of a row the reaper put back to `queued`. One that cannot be added now (Redis
 * went away, or the stopped run's queue job is still locked) is left: the row stays queued, and a
 * later pass finds its queue job missing or finished and adds it.
 */
async function requeue(c: Candidate, priority: number): Promise<void> {
  await requeueJob(c.queue as QueueName, c.kind as JobKind, { jobId: c.id, tenantId: c.tenantId, total: c.total }, { queueJobId: c.queueJobId ?? c.id, priority }).catch(
    () => undefined,
  );
}

/** The latest jobs the reaper finalized, for the stuck page (read newest first from the (status, finishedAt) index). */
export async function listRecentlyReaped(limit = 20) {
  const rows = await db().job.findMany({
    where: { status: "abandoned" },
    orderBy: { finishedAt: "desc" },
    take: limit,
    select: { id: true, kind: true, queue: true, message: true, finishedAt: true, processed: true, failed: true, total: true, tenant: { select: { slug: true } } },
  });
  return rows.map((r) => ({ ...r, tenant: r.tenant.slug, finishedAt: r.finishedAt?.toISOString() ?? null }));
}

/** The stuck page's counts beside its lists. */
export interface StuckCounts {
  /** Jobs in *delayed*: waiting for a rate-limit window, which is not stuck. */
  delayed: number;
  /** Jobs the reaper abandoned in the last 24 hours (real time). */
  reapedLastDay: number;
}

/** How far back the stuck page counts reaped jobs (its "Reaped in the last 24 h"). */
const REAPED_WINDOW_MS = 24 * 3_600_000;

/** Plain counts for the stuck page, read side by side. */
export async function getStuckCounts(now = new Date()): Promise<StuckCounts> {
  const [delayed, reapedLastDay] = await Promise.all([
    db().job.count({ where: { status: "delayed" } }),
    db().job.count({ where: { status: "abandoned", finishedAt: { gte: new Date(now.getTime() - REAPED_WINDOW_MS) } } }),
  ]);
  return { delayed, reapedLastDay };
}

/** Split jobs still `running` although none of their parts is open: settle them now. */
async function settleStrandedParents(): Promise<void> {
  const stranded = await db().$queryRaw<{ id: string }[]>`
    SELECT p.id FROM "Job" p
    WHERE p.status = 'running'
      AND EXISTS (SELECT 1 FROM "Job" c WHERE c."parentId" = p.id)
      AND NOT EXISTS (SELECT 1 FROM "Job" c WHERE c."parentId" = p.id AND c.status IN ('queued', 'running', 'delayed'))
    LIMIT 100`;
  for (const { id } of stranded) await settleParent(id);
}

/** A job still waiting in *delayed* well after the time it was due back in a worker slot. */
export interface OverdueDelayedJob {
  id: string;
  kind: string;
  queue: string;
  tenant: string;
  message: string | null;
  wakeUpAt: string;
  /** Production milliseconds since it was due back. */
  overdueMs: number;
  /** What BullMQ says of the queue job: delayed, waiting (no free slot), active, unknown… */
  queueState: string;
}

/**
 * Delayed jobs past their wake-up time by more than the reaper's grace: not stuck (nothing is
 * abandoned for it), but flagged — a wake-up that does not happen means no worker consumes the
 * queue, or every slot is taken. Oldest first.
 */
export async function listOverdueDelayedJobs(limit = 100, now = new Date()): Promise<OverdueDelayedJob[]> {
  const scale = env().BOUNDED_TIME_SCALE;
  const rows = await db().$queryRaw<{ id: string; kind: string; queue: string; tenant: string; message: string | null; wakeUpAt: Date; queueJobId: string | null }[]>`
    SELECT j.id, j.kind, j.queue, t.slug AS tenant, j.message, j."wakeUpAt", j."queueJobId"
    FROM "Job" j JOIN "Tenant" t ON t.id = j."tenantId"
    WHERE j.status = 'delayed'
      AND j."wakeUpAt" < (${now}::timestamptz AT TIME ZONE 'UTC') - make_interval(secs => ${reapGraceMs()}::float8 / 1000)
    ORDER BY j."wakeUpAt" ASC
    LIMIT ${limit}`;
  return Promise.all(
    rows.map(async (r) => ({
      id: r.id,
      kind: r.kind,
      queue: r.queue,
      tenant: r.tenant,
      message: r.message,
      wakeUpAt: r.wakeUpAt.toISOString(),
      overdueMs: Math.max(0, (now.getTime() - r.wakeUpAt.getTime()) / scale),
      queueState: await queueState(r.queue, r.queueJobId ?? r.id),
    })),
  );
}
