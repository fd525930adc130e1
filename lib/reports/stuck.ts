import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { reapGraceMs } from "@/lib/jobs/liveness";
import {
  classifyOpenJobs,
  queueStateOf,
  toJob,
  type StuckCause,
  type StuckGroupJob,
} from "@/lib/diagnosis/stuck-causes";

/** Why an open job is stuck: the open causes of the stuck page (lib/diagnosis/stuck-causes.ts). */
export type StuckReason = Exclude<StuckCause, "awaiting_operator">;

/** A stuck open job as the overview lists it: the stuck page's row, with its cause. */
export type StuckJob = StuckGroupJob & { reasons: StuckReason[] };

// Timestamps are stored as UTC without a time zone (Prisma's convention): raw SQL compares them
// with `now() AT TIME ZONE 'UTC'`, whatever the server's TimeZone setting.

/**
 * Open jobs that are stuck, by the stuck page's rules (one cause each), oldest first: the same
 * jobs the page groups, so the overview's count and the page's never disagree.
 */
export async function listStuckJobs(limit = 200, now = Date.now()): Promise<StuckJob[]> {
  const { stuck } = await classifyOpenJobs(new Date(now));
  return stuck.slice(0, limit).map((c) => ({ ...toJob(c), reasons: [c.cause] }));
}

/** For the `bounded_jobs_stuck{kind}` gauge: the stuck page's open groups, by kind. */
export async function countStuckByKind(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const c of (await classifyOpenJobs()).stuck) counts[c.row.kind] = (counts[c.row.kind] ?? 0) + 1;
  return counts;
}

/** The stuck page's counts beside its lists. */
export interface StuckCounts {
  /** Jobs in *delayed* — for a rate-limit window, a service that is down or the batch service — which are not stuck. */
  delayed: number;
}

/** Plain counts for the stuck page. */
export async function getStuckCounts(): Promise<StuckCounts> {
  return { delayed: await db().job.count({ where: { status: "delayed" } }) };
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
  const rows = await db().$queryRaw<
    {
      id: string;
      kind: string;
      queue: string;
      tenant: string;
      message: string | null;
      wakeUpAt: Date;
      queueJobId: string | null;
    }[]
  >`
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
      queueState: await queueStateOf(r.queue, r.queueJobId ?? r.id),
    })),
  );
}
