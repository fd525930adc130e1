import { randomUUID } from "node:crypto";
import { db, type Prisma } from "@/lib/db/client";

/**
 * The id of the tenant with this slug, created if it does not exist — in one statement, so two
 * requests for a new tenant at the same moment both succeed (Prisma's upsert reads, then inserts,
 * and the loser of that race fails on the unique slug).
 */
export async function ensureTenant(slug: string, tx: Prisma.TransactionClient = db()): Promise<string> {
  const rows = await tx.$queryRaw<{ id: string }[]>`
    INSERT INTO "Tenant" (id, slug) VALUES (${randomUUID()}::uuid, ${slug})
    ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug
    RETURNING id::text AS id`;
  return rows[0]!.id;
}
