import { randomUUID } from "node:crypto";
import { db } from "@/lib/db/client";

/**
 * A tenant slug no other test (or other run of this test, or another engineer's run against the
 * same database) uses: every integration test scopes its rows and assertions to its own tenant.
 */
export function uniqueTenantSlug(label: string): string {
  return `t-${label}-${randomUUID().slice(0, 8)}`.toLowerCase().slice(0, 63);
}

/**
 * Removes a tenant and everything written for it: transactions, model calls, jobs (their upload,
 * failures and events go with them by cascade), then the tenant row. A missing tenant is fine.
 */
export async function deleteTenant(slug: string): Promise<void> {
  const tenant = await db().tenant.findUnique({ where: { slug }, select: { id: true } });
  if (!tenant) return;
  const jobIds = (await db().job.findMany({ where: { tenantId: tenant.id }, select: { id: true } })).map((j) => j.id);
  await db().transaction.deleteMany({ where: { tenantId: tenant.id } });
  await db().invoice.deleteMany({ where: { tenantId: tenant.id } });
  await db().modelCall.deleteMany({ where: { jobId: { in: jobIds } } });
  await db().job.deleteMany({ where: { tenantId: tenant.id } });
  await db().tenant.delete({ where: { id: tenant.id } });
}
