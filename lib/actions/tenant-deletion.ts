import { OPEN_STATUSES } from "@/lib/core/job-statuses";
import { db, Prisma } from "@/lib/db/client";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { progressChannel, snapshotKeys } from "@/lib/progress/snapshot";
import { removeQueueJob } from "@/lib/queues/queues";
import { FAMILIES, scopeOf } from "@/lib/ratelimit/buckets";
import { key, redis } from "@/lib/redis/client";
import { utc } from "@/lib/retention/pass";
import { cancelKey } from "@/lib/runs/cancel-request";
import { deleteChunk, JOB_CHILD_TABLES, TENANT_OWN_TABLES, type TenantRef, whereOwned } from "./tenant-tables";

/**
 * A tenant's deletion, flat in the tenant's size. It is started once (`startTenantDeletion`: the
 * row's `deletingAt`, after which the tenant takes no new work), then goes a batch at a time
 * (`runTenantDeletion`), so no statement holds more than one batch of rows, no transaction is
 * long, and memory holds one batch of jobs:
 *   1. the tenant's jobs, newest first (a part before the job it was split from), `batch` at a
 *      time, keyset-walked: their queue jobs removed; the rows that name them deleted table by
 *      table, at most `batch` rows per statement; then the jobs themselves; then their progress
 *      snapshots and cancel requests, each job's answer dropped by every web process;
 *   2. the tenant's own rows, table by table in `TENANT_TABLES` order, `batch` rows per statement;
 *   3. its limiter buckets, then its row.
 * Each statement adds what it deleted to the row's `deletedRows`, so the count survives anything.
 * A run stops when its time is up; whatever stops it (a crash, PostgreSQL restarting), the next
 * run starts again from step 1 and finds only what is left, so running it twice — or two at once
 * — deletes nothing twice and forgets nothing. The workers continue every started deletion
 * (`continueTenantDeletions`, workers/schedulers/tenant-deletions.ts).
 */

export interface DeletionOptions {
  /** Jobs per batch, and rows per statement. @defaultValue `BOUNDED_TENANT_DELETION_BATCH` (500) */
  batch?: number;
  /** `performance.now()` past which the run stops after its current statement. @defaultValue no limit */
  until?: number;
  /** Called after each batch of jobs is gone (a test stops a deletion there, as a crash would). */
  afterBatch?: (batch: number) => Promise<void> | void;
}

/** What one run removed; `done` once the tenant's row is gone. */
export interface DeletionRun {
  done: boolean;
  removed: Record<string, number>;
  redisKeys: number;
  /** What every run of the deletion removed, the row included: set by the run that deleted the row. */
  total?: { rows: Record<string, number>; redisKeys: number };
}

/** How far a deletion got, over every run: as the tenant's row keeps it. */
export interface DeletionProgress {
  since: Date;
  rows: Record<string, number>;
  redisKeys: number;
}

const REDIS_KEYS = "redisKeys";

export function deletionProgressOf(row: { deletingAt: Date; deletedRows: unknown }): DeletionProgress {
  const { [REDIS_KEYS]: redisKeys = 0, ...rows } = (row.deletedRows ?? {}) as Record<string, number>;
  return { since: row.deletingAt, rows, redisKeys };
}

export type StartedDeletion = { type: "open_jobs"; open: number } | { type: "started"; fresh: boolean };

/**
 * Marks the tenant as being deleted, unless one of its jobs is open (it would write again). The
 * tenant's row is locked first, so a job being created at that moment (`ensureTenant` locks the
 * row too) either commits before the count sees it, or finds the mark and is refused.
 */
export async function startTenantDeletion(tenant: TenantRef): Promise<StartedDeletion> {
  return db().$transaction(async (tx) => {
    const [row] = await tx.$queryRaw<{ deletingAt: Date | null }[]>`
      SELECT "deletingAt" FROM "Tenant" WHERE id = ${tenant.id}::uuid FOR UPDATE`;
    if (row?.deletingAt) return { type: "started", fresh: false };
    const open = await tx.job.count({ where: { tenantId: tenant.id, status: { in: [...OPEN_STATUSES] } } });
    if (open > 0) return { type: "open_jobs", open };
    await tx.$executeRaw`UPDATE "Tenant" SET "deletingAt" = now() WHERE id = ${tenant.id}::uuid`;
    return { type: "started", fresh: true };
  });
}

interface BatchJob {
  id: string;
  queue: string;
  queueJobId: string | null;
  progressToken: string;
  createdAt: Date;
}

/** Where the walk over the tenant's jobs goes on from: past the oldest job of the batch before. */
type JobKey = { createdAt: Date; id: string } | null;

/** The next `batch` jobs of the tenant, newest first (by its index on tenant and creation time). */
function nextJobs(tenantId: string, after: JobKey, batch: number): Promise<BatchJob[]> {
  const past = after ? Prisma.sql`AND ("createdAt", id) < (${utc(after.createdAt)}, ${after.id}::uuid)` : Prisma.empty;
  return db().$queryRaw<BatchJob[]>`
    SELECT id::text AS id, queue, "queueJobId", "progressToken", "createdAt" FROM "Job"
    WHERE "tenantId" = ${tenantId}::uuid ${past}
    ORDER BY "createdAt" DESC, id DESC LIMIT ${batch}`;
}

interface Walk {
  run: DeletionRun;
  batch: number;
  until: number;
}

/** Deletes `where`'s rows of `table`, `batch` at a time; false when time ran out with rows left. */
async function deleteAll(tenant: TenantRef, table: string, where: Prisma.Sql, walk: Walk): Promise<boolean> {
  for (;;) {
    const n = await deleteChunk(tenant.id, table, where, walk.batch);
    walk.run.removed[table] = (walk.run.removed[table] ?? 0) + n;
    if (n < walk.batch) return true;
    if (performance.now() > walk.until) return false;
  }
}

/** Step 1 for one batch of jobs; false when time ran out before the batch's job rows went. */
async function deleteJobBatch(tenant: TenantRef, jobs: BatchJob[], walk: Walk): Promise<boolean> {
  const ids = jobs.map((j) => j.id);
  // Before the rows: a queue job of a job that is gone would run for nothing. One that cannot be
  // removed (locked by a run winding down) finishes on its own and finds no row.
  await Promise.all(jobs.map((j) => removeQueueJob(j.queue, j.queueJobId ?? j.id).catch(() => undefined)));
  for (const table of JOB_CHILD_TABLES)
    if (!(await deleteAll(tenant, table, whereOwned({ by: "jobId" }, tenant, ids), walk))) return false;
  await deleteAll(tenant, "Job", Prisma.sql`id = ANY(${ids}::uuid[])`, walk);
  // After the rows: a key recreated in between (a page polled the progress) names a job that no
  // longer exists. A crash right here leaves snapshots that expire within a day by themselves.
  const keys = jobs.flatMap((j) => [...snapshotKeys(j.progressToken), cancelKey(j.id)]);
  const pipeline = redis()
    .pipeline()
    .del(...keys);
  // Every web process drops its copy of each job's answer: the next read finds no job (lib/progress/hub.ts).
  for (const job of jobs) pipeline.publish(progressChannel(), `${job.progressToken} 0`);
  const [[failed, deleted] = [null, 0]] = (await pipeline.exec()) ?? [];
  if (failed) throw failed;
  const removed = Number(deleted) || 0;
  await noteRedisKeys(tenant.id, removed);
  walk.run.redisKeys += removed;
  return true;
}

async function noteRedisKeys(tenantId: string, n: number): Promise<void> {
  if (n === 0) return;
  await db().$executeRaw`
    UPDATE "Tenant" SET "deletedRows" = jsonb_set("deletedRows", ARRAY[${REDIS_KEYS}::text],
      to_jsonb(COALESCE(("deletedRows" ->> ${REDIS_KEYS}::text)::bigint, 0) + ${n}::bigint))
    WHERE id = ${tenantId}::uuid`;
}

/** Step 1: every job of the tenant with the rows that name it; false when time ran out first. */
async function deleteJobs(tenant: TenantRef, walk: Walk, afterBatch: DeletionOptions["afterBatch"]): Promise<boolean> {
  let after: JobKey = null;
  for (let n = 1; ; n++) {
    const jobs = await nextJobs(tenant.id, after, walk.batch);
    if (jobs.length === 0) return true;
    after = jobs[jobs.length - 1]!;
    if (!(await deleteJobBatch(tenant, jobs, walk))) return false;
    await afterBatch?.(n);
    if (performance.now() > walk.until) return false;
  }
}

/** Steps 2 and 3: the tenant's own rows, its buckets, its row; false when time ran out first. */
async function deleteTenantOwn(tenant: TenantRef, walk: Walk): Promise<boolean> {
  for (const { table, owner } of TENANT_OWN_TABLES)
    if (!(await deleteAll(tenant, table, whereOwned(owner, tenant), walk))) return false;
  const buckets = FAMILIES.map((family) => key("ratelimit", `{${scopeOf(family, tenant.slug)}}`));
  const removed = await redis().del(...buckets);
  await noteRedisKeys(tenant.id, removed);
  walk.run.redisKeys += removed;
  const gone = await db().$queryRaw<{ deletingAt: Date; deletedRows: unknown }[]>`
    DELETE FROM "Tenant" WHERE id = ${tenant.id}::uuid AND "deletingAt" IS NOT NULL
    RETURNING "deletingAt", "deletedRows"`;
  walk.run.removed.Tenant = gone.length;
  if (gone[0]) {
    const { rows, redisKeys } = deletionProgressOf(gone[0]);
    walk.run.total = { rows: { ...rows, Tenant: 1 }, redisKeys };
  }
  return true;
}

/** Goes on with a started deletion until it is done or `until` has passed (see the module comment). */
export async function runTenantDeletion(tenant: TenantRef, options: DeletionOptions = {}): Promise<DeletionRun> {
  const run: DeletionRun = { done: false, removed: {}, redisKeys: 0 };
  const walk: Walk = {
    run,
    batch: options.batch ?? env().BOUNDED_TENANT_DELETION_BATCH,
    until: options.until ?? Number.POSITIVE_INFINITY,
  };
  if (!(await deleteJobs(tenant, walk, options.afterBatch))) return run;
  run.done = await deleteTenantOwn(tenant, walk);
  return run;
}

export interface ContinuedDeletion extends DeletionRun {
  tenant: string;
  /** The run stopped on this error; the next pass goes on. */
  error?: string;
}

/**
 * Goes on with every started deletion, oldest first, until each is done or `until` has passed:
 * what finishes a deletion whose request (or worker) was interrupted. One tenant's failure is
 * logged and the next tenant goes on.
 */
export async function continueTenantDeletions(options: DeletionOptions = {}): Promise<ContinuedDeletion[]> {
  const tenants = await db().$queryRaw<TenantRef[]>`
    SELECT id::text AS id, slug FROM "Tenant" WHERE "deletingAt" IS NOT NULL ORDER BY "deletingAt" LIMIT 100`;
  const results: ContinuedDeletion[] = [];
  for (const tenant of tenants) {
    try {
      results.push({ tenant: tenant.slug, ...(await runTenantDeletion(tenant, options)) });
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      logger("tenants").error({ tenant: tenant.slug, err }, "tenant deletion stopped; the next pass goes on");
      results.push({ tenant: tenant.slug, done: false, removed: {}, redisKeys: 0, error });
    }
    if (performance.now() > (options.until ?? Number.POSITIVE_INFINITY)) break;
  }
  return results;
}
