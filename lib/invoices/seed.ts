import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { db } from "@/lib/db/client";

/** One invoice to seed; amounts in minor units, dates as `YYYY-MM-DD` (UTC). */
export interface InvoiceSeed {
  number: string;
  amountMinor: bigint | number;
  currency: string;
  dueDate: string;
  /** @defaultValue "open" */
  status?: "open" | "overdue" | "paid";
}

/**
 * Writes invoices for a tenant (created when missing). An invoice number the tenant already has
 * is left as it is. Returns the tenant's id and how many invoices were written.
 */
export async function seedInvoices(
  tenantSlug: string,
  invoices: InvoiceSeed[],
): Promise<{ tenantId: string; created: number }> {
  const tenant = { id: await ensureTenant(tenantSlug) };
  const { count } = await db().invoice.createMany({
    data: invoices.map((inv) => ({
      tenantId: tenant.id,
      number: inv.number,
      amountMinor: BigInt(inv.amountMinor),
      currency: inv.currency,
      dueDate: new Date(`${inv.dueDate}T00:00:00Z`),
      status: inv.status ?? "open",
    })),
    skipDuplicates: true,
  });
  return { tenantId: tenant.id, created: count };
}

/** Removes a tenant's invoices (tests and demos clean up with this). */
export async function deleteInvoices(tenantSlug: string): Promise<number> {
  const { count } = await db().invoice.deleteMany({ where: { tenant: { slug: tenantSlug } } });
  return count;
}
