import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { OPEN_STATUSES } from "@/lib/core/job-statuses";
import { db, Prisma } from "@/lib/db/client";
import { formatCount } from "@/lib/format/number";
import type { Described } from "@/lib/http/operator";
import { logger } from "@/lib/log";
import { progressChannel, snapshotKeys } from "@/lib/progress/snapshot";
import { removeQueueJob } from "@/lib/queues/queues";
import { FAMILIES, scopeOf } from "@/lib/ratelimit/buckets";
import { key, redis } from "@/lib/redis/client";
import { cancelKey } from "@/lib/runs/cancel-request";

/**
 * Deleting a tenant: every row that is the tenant's or names one of its jobs, its files, answers,
 * limiter buckets, progress snapshots and queue jobs — everything but the audit log, which keeps
 * the entry of the deletion itself. A dry run by default (what would go, counted); done only when
 * the caller confirms with the tenant's name, and refused while any of its jobs is still queued,
 * running or waiting (they would write again). The rows go in one transaction: a failure leaves
 * the tenant whole.
 */

/** How a table's rows are the tenant's: its own column, a column naming one of its jobs, or its slug. */
type Owner = { by: "tenantId" } | { by: "jobId" } | { by: "slug"; column: string } | { by: "adId" };

/**
 * Every table that can hold a tenant's rows, in the order they are deleted (children before the
 * rows they reference). `lib/actions/delete-tenant.integration.test.ts` checks it against the
 * database's own list of tables, so a new table is either here or among `GLOBAL_TABLES`.
 */
export const TENANT_TABLES: readonly { table: string; owner: Owner }[] = [
  { table: "JobBatch", owner: { by: "jobId" } },
  { table: "Upload", owner: { by: "jobId" } },
  { table: "JobItemFailure", owner: { by: "jobId" } },
  { table: "JobItem", owner: { by: "jobId" } },
  { table: "JobEvent", owner: { by: "jobId" } },
  { table: "JobFile", owner: { by: "jobId" } },
  { table: "CategoryAnswerUse", owner: { by: "jobId" } },
  { table: "WebhookDelivery", owner: { by: "jobId" } },
  { table: "ModelCall", owner: { by: "jobId" } },
  { table: "Transaction", owner: { by: "tenantId" } },
  { table: "MarketplaceRecord", owner: { by: "tenantId" } },
  { table: "Invoice", owner: { by: "tenantId" } },
  { table: "CardImage", owner: { by: "adId" } },
  { table: "QuotaSpend", owner: { by: "tenantId" } },
  { table: "ReserveReclaim", owner: { by: "tenantId" } },
  { table: "LateRelease", owner: { by: "tenantId" } },
  { table: "QuotaReserve", owner: { by: "tenantId" } },
  { table: "QuotaPack", owner: { by: "tenantId" } },
  { table: "Ad", owner: { by: "tenantId" } },
  { table: "WebhookEndpoint", owner: { by: "tenantId" } },
  { table: "CategoryAnswer", owner: { by: "tenantId" } },
  { table: "RateLimitRollup", owner: { by: "slug", column: "tenant" } },
  { table: "Job", owner: { by: "tenantId" } },
];

/** Tables that hold no tenant's rows: shared reference data, people, settings, sums over every tenant, the audit log. */
export const GLOBAL_TABLES = [
  "Category",
  "User",
  "ApiToken",
  "Setting",
  "ModelCallRollup",
  "ModelCallRollupDay",
  "KindFiguresDay",
  "AuditEntry",
  "AuditRefusalTally",
  "_prisma_migrations",
] as const;

export const deleteTenantQuerySchema = z.strictObject({
  /** The tenant's name again: without it, nothing is deleted and the answer says what would be. */
  confirm: z.string().max(100).optional(),
});

export type DeleteTenantResult =
  | { type: "not_found"; tenant: string }
  | { type: "open_jobs"; tenant: string; open: number }
  | { type: "confirm_mismatch"; tenant: string; confirm: string }
  | { type: "preview" | "deleted"; tenant: string; rows: Record<string, number>; redisKeys: number };

export async function deleteTenant(
  slug: string,
  by: Principal,
  input: z.output<typeof deleteTenantQuerySchema>,
): Promise<DeleteTenantResult> {
  const tenant = await db().tenant.findUnique({ where: { slug }, select: { id: true, slug: true } });
  if (!tenant) return { type: "not_found", tenant: slug };
  if (input.confirm !== undefined && input.confirm !== tenant.slug)
    return { type: "confirm_mismatch", tenant: tenant.slug, confirm: input.confirm };
  const open = await db().job.count({ where: { tenantId: tenant.id, status: { in: [...OPEN_STATUSES] } } });
  const jobs = await db().job.findMany({
    where: { tenantId: tenant.id },
    select: { id: true, queue: true, queueJobId: true, progressToken: true },
  });
  const keys = redisKeysOf(tenant.slug, jobs);
  if (input.confirm === undefined)
    return { type: "preview", tenant: tenant.slug, rows: await countRows(tenant, jobs), redisKeys: keys.length };
  if (open > 0) return { type: "open_jobs", tenant: tenant.slug, open };
  const rows = await deleteRows(tenant, jobs);
  // After the rows: a key recreated in between (a page polled the progress) names a job that no longer exists.
  const removed = keys.length ? await redis().del(...keys) : 0;
  // Every web process drops its copy of each job's answer: the next read finds no job (lib/progress/hub.ts).
  for (const job of jobs) await redis().publish(progressChannel(), `${job.progressToken} 0`);
  for (const job of jobs) await removeQueueJob(job.queue, job.queueJobId ?? job.id).catch(() => undefined);
  logger("tenants").info({ tenant: tenant.slug, by: by.username, rows, redisKeys: removed }, "tenant deleted");
  return { type: "deleted", tenant: tenant.slug, rows, redisKeys: removed };
}

interface TenantJob {
  id: string;
  queue: string;
  queueJobId: string | null;
  progressToken: string;
}

function whereOwned(owner: Owner, tenant: { id: string; slug: string }, jobIds: string[]): Prisma.Sql {
  switch (owner.by) {
    case "tenantId":
      return Prisma.sql`"tenantId" = ${tenant.id}::uuid`;
    case "jobId":
      return Prisma.sql`"jobId" = ANY(${jobIds}::uuid[])`;
    case "adId":
      return Prisma.sql`"adId" IN (SELECT id FROM "Ad" WHERE "tenantId" = ${tenant.id}::uuid)`;
    case "slug":
      return Prisma.sql`${Prisma.raw(`"${owner.column}"`)} = ${tenant.slug}`;
  }
}

async function countRows(tenant: { id: string; slug: string }, jobs: TenantJob[]): Promise<Record<string, number>> {
  const ids = jobs.map((j) => j.id);
  const rows: Record<string, number> = {};
  for (const { table, owner } of TENANT_TABLES) {
    const [r] = await db().$queryRaw<{ n: bigint }[]>`
      SELECT count(*) AS n FROM ${Prisma.raw(`"${table}"`)} WHERE ${whereOwned(owner, tenant, ids)}`;
    rows[table] = Number(r!.n);
  }
  rows.Tenant = 1;
  return rows;
}

async function deleteRows(tenant: { id: string; slug: string }, jobs: TenantJob[]): Promise<Record<string, number>> {
  const ids = jobs.map((j) => j.id);
  return db().$transaction(
    async (tx) => {
      const rows: Record<string, number> = {};
      for (const { table, owner } of TENANT_TABLES) {
        const from = Prisma.raw(`"${table}"`);
        // A part names the job it was split from: parts go before the jobs they belong to.
        if (table === "Job")
          rows.Job =
            await tx.$executeRaw`DELETE FROM "Job" WHERE "tenantId" = ${tenant.id}::uuid AND "parentId" IS NOT NULL`;
        rows[table] =
          (rows[table] ?? 0) + (await tx.$executeRaw`DELETE FROM ${from} WHERE ${whereOwned(owner, tenant, ids)}`);
      }
      rows.Tenant = await tx.$executeRaw`DELETE FROM "Tenant" WHERE id = ${tenant.id}::uuid`;
      return rows;
    },
    { timeout: 600_000 },
  );
}

/** The tenant's keys in Redis: its limiter buckets, and each job's progress snapshot and cancel request. */
function redisKeysOf(slug: string, jobs: TenantJob[]): string[] {
  const buckets = FAMILIES.map((family) => key("ratelimit", `{${scopeOf(family, slug)}}`));
  return [...buckets, ...jobs.flatMap((j) => [...snapshotKeys(j.progressToken), cancelKey(j.id)])];
}

/** One place that turns a deletion's result into an HTTP status and the words a person reads. */
export function describeDeleteTenant(r: DeleteTenantResult): Described {
  switch (r.type) {
    case "not_found":
      return { ok: false, status: 404, code: "not_found", message: `No tenant is named “${r.tenant}”.` };
    case "confirm_mismatch":
      return {
        ok: false,
        status: 422,
        code: "confirm_mismatch",
        message: `confirm must repeat the tenant's name exactly (“${r.tenant}”), got “${r.confirm}”: nothing was deleted.`,
      };
    case "open_jobs":
      return {
        ok: false,
        status: 409,
        code: "tenant_has_open_jobs",
        message: `${r.tenant} has ${countOf(r.open, "job")} still queued, running or waiting: cancel them or let them finish, then delete the tenant. Nothing was deleted.`,
      };
    case "preview":
      return {
        ok: true,
        status: 200,
        code: "preview",
        message: `Nothing deleted yet. Deleting ${r.tenant} would remove ${rowsPhrase(r.rows)} and ${countOf(r.redisKeys, "Redis key")}; repeat with ?confirm=${r.tenant} to do it.`,
        audit: `dry run: would remove ${rowsPhrase(r.rows)}`,
      };
    case "deleted":
      return {
        ok: true,
        status: 200,
        code: "deleted",
        message: `Deleted ${r.tenant}: ${rowsPhrase(r.rows)} and ${countOf(r.redisKeys, "Redis key")} removed.`,
      };
  }
}

const countOf = (n: number, noun: string) => `${formatCount(n)} ${noun}${n === 1 ? "" : "s"}`;

function rowsPhrase(rows: Record<string, number>): string {
  const total = Object.values(rows).reduce((a, b) => a + b, 0);
  const tables = Object.entries(rows)
    .filter(([, n]) => n > 0)
    .map(([t, n]) => `${t} ${formatCount(n)}`);
  return `${countOf(total, "row")} (${tables.join(", ")})`;
}
