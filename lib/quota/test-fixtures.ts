import { randomUUID } from "node:crypto";
import { db } from "@/lib/db/client";

/**
 * For quota tests against the real database: a tenant of their own with a pack and ads, and the
 * pack's books read back. Every tenant made here is removed by `dropQuotaTenants` (its pack,
 * reserves, spends, ads and images go with it by cascade).
 */
const made: string[] = [];

export async function quotaTenant(
  label: string,
  units: number,
  ads = 1,
): Promise<{ tenantId: string; packId: string; adIds: string[] }> {
  const slug = `t-quota-${label}-${randomUUID().slice(0, 8)}`.toLowerCase().slice(0, 63);
  const tenantId = randomUUID();
  const packId = randomUUID();
  const adIds = Array.from({ length: ads }, () => randomUUID());
  made.push(tenantId);
  // One statement: property tests make a tenant per run.
  await db().$executeRaw`
    WITH t AS (INSERT INTO "Tenant" (id, slug) VALUES (${tenantId}::uuid, ${slug}) RETURNING id),
    p AS (INSERT INTO "QuotaPack" (id, "tenantId", size, remaining, "updatedAt") SELECT ${packId}::uuid, id, ${units}, ${units}, now() AT TIME ZONE 'UTC' FROM t RETURNING id)
    INSERT INTO "Ad" (id, "tenantId", params) SELECT unnest(${adIds}::uuid[]), id, '{}'::jsonb FROM t`;
  return { tenantId, packId, adIds };
}

export async function dropQuotaTenants(): Promise<void> {
  const ids = made.splice(0);
  if (ids.length === 0) return;
  await db().job.deleteMany({ where: { tenantId: { in: ids } } });
  await db().tenant.deleteMany({ where: { id: { in: ids } } });
}

/** The pack's books: what the invariant `remaining + spent + live = size` is checked on. */
export async function books(packId: string) {
  const [pack, spent, live, debts, reclaimed, late] = await Promise.all([
    db().quotaPack.findUniqueOrThrow({ where: { id: packId }, select: { size: true, remaining: true } }),
    db().quotaSpend.count({ where: { packId } }),
    db().quotaReserve.count({ where: { packId } }),
    db().lateRelease.count({ where: { packId, resolution: "debt", debtSettledAt: null } }),
    db().reserveReclaim.count({ where: { packId } }),
    db().lateRelease.count({ where: { packId } }),
  ]);
  return { ...pack, spent, live, debts, reclaimed, late };
}
