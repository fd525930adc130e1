import { randomUUID } from "node:crypto";
import { db, type Prisma } from "@/lib/db/client";
import { TenantBeingDeleted } from "./being-deleted";

/**
 * The id of the tenant with this slug, created if it does not exist — in one statement, so two
 * requests for a new tenant at the same moment both succeed (Prisma's upsert reads, then inserts,
 * and the loser of that race fails on the unique slug).
 *
 * Throws `TenantBeingDeleted` when the tenant's deletion was started: every path that starts work
 * for a tenant comes through here. The statement locks the tenant's row until the caller's
 * transaction ends, so a deletion starting at the same moment either waits for the new job (and
 * is refused while it is open) or is seen here.
 */
export async function ensureTenant(slug: string, tx: Prisma.TransactionClient = db()): Promise<string> {
  const rows = await tx.$queryRaw<{ id: string; deletingAt: Date | null }[]>`
    INSERT INTO "Tenant" (id, slug) VALUES (${randomUUID()}::uuid, ${slug})
    ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug
    RETURNING id::text AS id, "deletingAt"`;
  const row = rows[0]!;
  if (row.deletingAt) throw new TenantBeingDeleted(slug, row.deletingAt);
  return row.id;
}
