import { db, type Prisma } from "@/lib/db/client";

/**
 * A control signal: the tenant is being deleted, so it takes no new work (a job, a part, a retry,
 * a pack, a webhook endpoint). Thrown where the tenant's row is taken for new work
 * (`ensureTenant`), inside the transaction that would write it, so nothing of
 * the refused work is saved; the HTTP wrappers answer it 409 `tenant_being_deleted`
 * (lib/http/api.ts, lib/http/operator.ts).
 */
export class TenantBeingDeleted extends Error {
  override name = "TenantBeingDeleted";
  constructor(
    readonly tenant: string,
    readonly since: Date,
  ) {
    super(tenantBeingDeletedMessage(tenant, since));
  }
}

/** What a caller whose new work was refused reads. */
export function tenantBeingDeletedMessage(tenant: string, since: Date): string {
  return `${tenant} is being deleted (since ${since.toISOString()}): it takes no new work. Once the deletion has finished, the name may be used again as a new tenant.`;
}

/**
 * Takes a share lock on the row of the job's tenant, for work that reopens or adds to a job (a
 * retry, a split, a resume), and says whether the tenant's deletion was started (then the work must
 * not happen: null when it may). The lock orders it with the deletion's start, which locks the row
 * before it counts the open jobs: either the work commits first (and the deletion is refused while
 * that job is open) or the deletion does (and this reads it).
 */
export async function lockTenantOfJob(
  tx: Prisma.TransactionClient,
  jobId: string,
): Promise<{ tenant: string; since: Date } | null> {
  const [row] = await tx.$queryRaw<{ slug: string; deletingAt: Date | null }[]>`
    SELECT t.slug, t."deletingAt" FROM "Tenant" t JOIN "Job" j ON j."tenantId" = t.id
    WHERE j.id = ${jobId}::uuid FOR SHARE OF t`;
  return row?.deletingAt ? { tenant: row.slug, since: row.deletingAt } : null;
}

/**
 * How long the oldest tenant deletion still going on has been going on, in real seconds (0 when
 * none is): `bounded_tenant_deletion_oldest_seconds`. Reads the partial index of the tenants being
 * deleted, so it costs the deletions under way, not the tenants.
 */
export async function oldestDeletionSeconds(): Promise<number> {
  const [row] = await db().$queryRaw<{ seconds: number | null }[]>`
    SELECT extract(epoch FROM now() - min("deletingAt"))::float8 AS seconds FROM "Tenant" WHERE "deletingAt" IS NOT NULL`;
  return Math.max(0, row?.seconds ?? 0);
}
