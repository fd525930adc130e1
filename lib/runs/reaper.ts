import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { formatDuration, formatDurationRounded } from "@/lib/format/duration";
import { requeueJob } from "@/lib/queues/queues";
import { QUEUE_NAMES, type JobKind, type QueueName } from "@/lib/catalog/catalog";
import { RETRY_PRIORITY, tenantPriority } from "@/lib/queues/fairness";
import { CREATE_ENQUEUE_WINDOW_MS } from "@/lib/jobs/create";
import { reapGraceMs } from "@/lib/jobs/liveness";
import { NO_WORKER_PREFIX } from "@/lib/diagnosis/resume-policy";
import { queueStateOf } from "@/lib/diagnosis/stuck-causes";
import type { JobStatus } from "@/lib/core/job-statuses";
import { resumeOutsideServiceFailures } from "./auto-resume";
import { resumeStoppedRun } from "./crash-resume";
import { finalizeJob, settleParent } from "./finalize";

/** Candidates a reaper pass settles at once (each: one queue lookup, one statement). */
const REAP_CONCURRENCY = 8;

// Timestamps are stored as UTC without a time zone (Prisma's convention): raw SQL compares them
// with `now() AT TIME ZONE 'UTC'`, whatever the server's TimeZone setting.

export interface ReapedJob {
  id: string;
  kind: string;
  /** The row's status after the pass: `queued` (resumed or queued again) or `failed` (stopped at the bound). */
  status: JobStatus;
  /**
   * What the reaper did: resumed a stopped run, queued a row the queue had lost, ended it at the
   * bound, or resumed a job an outside service had ended (lib/diagnosis/resume-policy.ts, `AUTO_RESUME`).
   */
  action: "resumed" | "requeued" | "stopped" | "auto_resumed";
  message: string;
}

/**
 * The reaper's pass. No row is left for a human; each stuck row is put back to work:
 * - a `running` row whose run stopped — its queue job is gone or finished, or it is silent past
 *   its hard limit plus the grace — is resumed from its cursor under a new attempt (counted and
 *   bounded: lib/runs/crash-resume.ts), in front of fresh jobs as a retry is
 *   (lib/queues/fairness.ts); at the bound it ends `failed` with a message a person understands.
 *   Before that, a worker that picks up the queue job BullMQ handed back takes it over the same way;
 * - a `queued` or `delayed` row whose queue job is missing or finished is queued again (BullMQ job
 *   id = the row's, so this never runs it twice). A queued row is given `CREATE_ENQUEUE_WINDOW_MS`
 *   first, so a start that is still adding its queue job is not raced.
 * A split job is never touched: it ends with its parts; one whose parts all ended without settling
 * it (its settling was interrupted) is settled here.
 * Last, the platform's own resumes of jobs an outside service ended (./auto-resume.ts).
 */
export async function reapStuckJobs(now = new Date()): Promise<ReapedJob[]> {
  await settleStrandedParents();
  const grace = reapGraceMs();
  // Running (and delayed) rows first, in their own query: a backlog of queued rows waiting for a
  // worker must never crowd a dead run out of the pass.
  const candidates = [
    ...(await candidatesOf(["running", "delayed"], grace, 500, now)),
    ...(await candidatesOf(["queued"], Math.max(grace, CREATE_ENQUEUE_WINDOW_MS), 200, now)),
  ];
  const reaped: ReapedJob[] = [];
  // Side by side: after a worker machine dies, its dozens of rows are all due in the same pass, and
  // one at a time (a queue lookup and a statement each) the last would wait for all the others.
  const queue = [...candidates];
  await Promise.all(
    Array.from({ length: Math.min(REAP_CONCURRENCY, queue.length) }, async () => {
      for (let c = queue.shift(); c; c = queue.shift()) {
        const done = await reapOne(c, now);
        if (done) reaped.push(done);
      }
    }),
  );
  for (const r of await resumeOutsideServiceFailures(now))
    reaped.push({ id: r.id, kind: r.kind, status: "queued", action: "auto_resumed", message: r.message });
  return reaped;
}

/** Rows in `statuses` without a sign of life for `silentMs`, oldest sign first (split jobs never). */
function candidatesOf(statuses: JobStatus[], silentMs: number, limit: number, now: Date): Promise<Candidate[]> {
  const scale = env().BOUNDED_TIME_SCALE;
  const grace = reapGraceMs();
  return db().$queryRaw<Candidate[]>`
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
}

/** One candidate: queued again, resumed from its cursor, ended at the bound, or left (not stuck). */
async function reapOne(c: Candidate, now: Date): Promise<ReapedJob | null> {
  const state = await queueStateOf(c.queue, c.queueJobId ?? c.id);
  if (state === "unreachable") return null;
  const lost = state === "unknown" || state === "completed" || state === "failed";
  // Waiting for a worker or for its rate-limit window: not stuck.
  if (c.status !== "running") return lost ? requeueLost(c, state) : null;
  // Within its limits and still held by the queue (active, or handed back by BullMQ and waiting
  // for a worker, which will take it over): not stuck yet.
  if (!lost && !c.pastHard) return null;
  const why = lost
    ? `Its run stopped and the queue no longer runs it (queue state: ${state})`
    : `No sign of life for ${formatDurationRounded((now.getTime() - c.lastSign.getTime()) / env().BOUNDED_TIME_SCALE)}, past its hard limit of ${formatDuration(c.budgetHardMs)} (its worker stopped)`;
  const r = await resumeStoppedRun(c, { requeue: true, why });
  if (r.type === "stopped") return { id: c.id, kind: c.kind, status: "failed", action: "stopped", message: why };
  if (r.type !== "resumed") return null;
  // A dead run's job goes before fresh ones, as a retry does: it had its turn (lib/queues/fairness.ts).
  await requeue(c, RETRY_PRIORITY);
  return { id: c.id, kind: c.kind, status: "queued", action: "resumed", message: why };
}

interface Candidate {
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
    const message = `${NO_WORKER_PREFIX} “${c.queue}”, so nothing can run it.`;
    const status = await finalizeJob(c.id, c.attempt, { status: "failed", from: [c.status], message });
    return status ? { id: c.id, kind: c.kind, status, action: "stopped", message } : null;
  }
  const why =
    state === "unknown" ? "The queue had no job for it" : `Its queue job had ${state} while the job was ${c.status}`;
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
  await requeueJob(
    c.queue as QueueName,
    c.kind as JobKind,
    { jobId: c.id, tenantId: c.tenantId, total: c.total },
    { queueJobId: c.queueJobId ?? c.id, priority },
  ).catch(() => undefined);
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
