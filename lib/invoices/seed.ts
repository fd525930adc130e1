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

const DAY_MS = 86_400_000;
const addDays = (day: string, days: number) => new Date(Date.parse(`${day}T00:00:00Z`) + days * DAY_MS).toISOString().slice(0, 10);

/**
 * A demo mix of `count` invoices as of `asOf`: about two thirds open and past due (what a sweep
 * marks overdue), the rest due today or later, a few already paid. Deterministic for the same
 * arguments.
 */
export function sampleInvoices(count: number, options: { asOf?: string; prefix?: string } = {}): InvoiceSeed[] {
  const asOf = options.asOf ?? new Date().toISOString().slice(0, 10);
  const prefix = options.prefix ?? "INV";
  const currencies = ["EUR", "EUR", "EUR", "USD", "GBP", "CHF", "JPY"];
  return Array.from({ length: count }, (_, i) => {
    const n = i + 1;
    const pastDue = n % 3 !== 0;
    const currency = currencies[n % currencies.length]!;
    return {
      number: `${prefix}-${String(n).padStart(5, "0")}`,
      amountMinor: currency === "JPY" ? 1_000 + n * 137 : 1_500 + ((n * 7_919) % 250_000),
      currency,
      dueDate: addDays(asOf, pastDue ? -(1 + (n % 40)) : n % 20),
      status: n % 11 === 0 ? "paid" : "open",
    } satisfies InvoiceSeed;
  });
}

/**
 * Writes invoices for a tenant (created when missing). An invoice number the tenant already has
 * is left as it is. Returns the tenant's id and how many invoices were written.
 */
export async function seedInvoices(tenantSlug: string, invoices: InvoiceSeed[]): Promise<{ tenantId: string; created: number }> {
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
