import { z } from "zod";

/**
 * The most invoices one sweep takes on: at ~10 ms each that is ~4 min, inside the sweep's 5 min
 * budget; more due invoices wait for the next pass (they are still open and due then).
 */
export const MAX_INVOICES_PER_SWEEP = 20_000;

/**
 * What an `overdue_invoices` job works through (its `params`): the invoices that were due when
 * the job was created and the day they were due by. Fixed at creation, so a retry resumes at the
 * cursor over the same list.
 */
export const overdueSweepParamsSchema = z.object({
  /** The sweep's day, UTC: invoices due before it are overdue. */
  asOf: z.iso.date(),
  invoiceIds: z.array(z.uuid()).max(MAX_INVOICES_PER_SWEEP),
  /** Set when the sweep covers one tenant's invoices only. */
  tenant: z.string().optional(),
});
export type OverdueSweepParams = z.infer<typeof overdueSweepParamsSchema>;
