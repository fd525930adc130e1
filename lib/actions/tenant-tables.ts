import { db, Prisma } from "@/lib/db/client";

/**
 * Where a tenant's rows are: every table that can hold them, how a row names its tenant, and the
 * statements that count and delete them a bounded number at a time (lib/actions/tenant-deletion.ts).
 */

/**
 * How a table's rows are the tenant's: a column naming one of its jobs (deleted with that job's
 * batch), its own column, its slug, or one of its ads.
 */
export type Owner = { by: "jobId" } | { by: "tenantId" } | { by: "slug"; column: string } | { by: "adId" };

/**
 * Every table that can hold a tenant's rows, in the order they are deleted (children before the
 * rows they reference). The `jobId` tables go with each batch of jobs, before the batch's own job
 * rows; the others after every job is gone. `lib/actions/delete-tenant.integration.test.ts` checks
 * it against the database's own list of tables, so a new table is either here or among `GLOBAL_TABLES`.
 */
export const TENANT_TABLES: readonly { table: string; owner: Owner }[] = [
  { table: "JobBatch", owner: { by: "jobId" } },
  { table: "Upload", owner: { by: "jobId" } },
  { table: "JobItemFailure", owner: { by: "jobId" } },
  { table: "JobItem", owner: { by: "jobId" } },
  { table: "JobEvent", owner: { by: "jobId" } },
  { table: "JobFile", owner: { by: "jobId" } },
  { table: "CategoryAnswerUse", owner: { by: "jobId" } },
  // Named by its re-ask job; a row of an import deleted before its re-ask goes with the import (cascade).
  { table: "CategoryReask", owner: { by: "jobId" } },
  { table: "WebhookDelivery", owner: { by: "jobId" } },
  { table: "ModelCall", owner: { by: "jobId" } },
  // It has the tenant's id too, but its job may not be deleted before it (no cascade): it goes with its job.
  { table: "Transaction", owner: { by: "jobId" } },
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

/** The tables deleted with each batch of jobs, in order; the batch's job rows go after them. */
export const JOB_CHILD_TABLES = TENANT_TABLES.filter((t) => t.owner.by === "jobId").map((t) => t.table);

/** The tenant's own tables, deleted once its jobs are gone, in order. */
export const TENANT_OWN_TABLES = TENANT_TABLES.filter((t) => t.owner.by !== "jobId" && t.table !== "Job");

/** Tables that hold no tenant's rows: shared reference data, people, settings, sums over every tenant, the audit log. */
export const GLOBAL_TABLES = [
  "Category",
  "User",
  "ApiToken",
  "Setting",
  "ModelCallRollup",
  "ModelCallRollupDay",
  "ModelCallRollupWeek",
  "KindFiguresDay",
  "AuditEntry",
  "AuditRefusalTally",
  "_prisma_migrations",
] as const;

export interface TenantRef {
  id: string;
  slug: string;
}

/** The rows of a table that are the tenant's: `jobIds` given, only those of these jobs; else all of them. */
export function whereOwned(owner: Owner, tenant: TenantRef, jobIds?: string[]): Prisma.Sql {
  switch (owner.by) {
    case "tenantId":
      return Prisma.sql`"tenantId" = ${tenant.id}::uuid`;
    case "jobId":
      return jobIds
        ? Prisma.sql`"jobId" = ANY(${jobIds}::uuid[])`
        : Prisma.sql`"jobId" IN (SELECT id FROM "Job" WHERE "tenantId" = ${tenant.id}::uuid)`;
    case "adId":
      return Prisma.sql`"adId" IN (SELECT id FROM "Ad" WHERE "tenantId" = ${tenant.id}::uuid)`;
    case "slug":
      return Prisma.sql`${Prisma.raw(`"${owner.column}"`)} = ${tenant.slug}`;
  }
}

/** What a deletion would remove, per table (the dry run): counted by the database, no id read into memory. */
export async function countTenantRows(tenant: TenantRef): Promise<Record<string, number>> {
  const rows: Record<string, number> = {};
  for (const { table, owner } of TENANT_TABLES) {
    const [r] = await db().$queryRaw<{ n: bigint }[]>`
      SELECT count(*) AS n FROM ${Prisma.raw(`"${table}"`)} WHERE ${whereOwned(owner, tenant)}`;
    rows[table] = Number(r!.n);
  }
  rows.Tenant = 1;
  return rows;
}

/**
 * Deletes at most `limit` of the rows `where` picks from `table`, and adds how many went to the
 * tenant's `deletedRows` — in one statement, so the count never disagrees with what is gone,
 * whatever stops the deletion after it. The number deleted.
 */
export async function deleteChunk(tenantId: string, table: string, where: Prisma.Sql, limit: number): Promise<number> {
  const from = Prisma.raw(`"${table}"`);
  const [row] = await db().$queryRaw<{ n: bigint }[]>`
    WITH gone AS (
      DELETE FROM ${from} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${from} WHERE ${where} LIMIT ${limit}))
      RETURNING 1
    ), counted AS (SELECT count(*) AS n FROM gone),
    noted AS (
      UPDATE "Tenant" SET "deletedRows" = jsonb_set(
        "deletedRows", ARRAY[${table}::text], to_jsonb(COALESCE(("deletedRows" ->> ${table}::text)::bigint, 0) + (SELECT n FROM counted)))
      WHERE id = ${tenantId}::uuid AND (SELECT n FROM counted) > 0
    )
    SELECT n FROM counted`;
  return Number(row?.n ?? 0);
}
