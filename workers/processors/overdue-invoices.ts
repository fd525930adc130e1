import { z } from "zod";
import { db, type Prisma } from "@/lib/db/client";
import { textProblem } from "@/lib/db/storable";
import { formatReminder } from "@/lib/invoices/reminder";
import { overdueSweepParamsSchema } from "@/lib/invoices/schemas";
import { ItemError, JobFailed } from "@/lib/core/signals";
import { forEachItem } from "@/lib/runs/for-each-item";
import { countLabel, SEE_THE_LIST } from "@/lib/jobs/messages";
import type { Processor } from "@/lib/runs/processor";

/** What the sweep counts on its job's `result` as it goes (in each item's transaction). */
const tallySchema = z.object({ markedOverdue: z.number().int(), unchanged: z.number().int() }).partial();
type Tally = "markedOverdue" | "unchanged";

/** Adds one to a counter on `result`, in the item's transaction, so the counts survive a retry. */
async function count(tx: Prisma.TransactionClient, jobId: string, key: Tally): Promise<void> {
  await tx.$executeRaw`
    UPDATE "Job"
    SET result = jsonb_set(
      CASE WHEN jsonb_typeof(result) = 'object' THEN result ELSE '{}'::jsonb END,
      ARRAY[${key}]::text[],
      to_jsonb(COALESCE((result->>${key})::int, 0) + 1)
    )
    WHERE id = ${jobId}::uuid`;
}

/**
 * `overdue_invoices`: one pass over the invoices selected when the job was created (its params),
 * one row at a time. An open invoice due before the sweep's day becomes `overdue` with
 * `overdueAt` and a reminder text; an invoice that is no longer open (paid, already overdue) is
 * left as it is, so running the pass again changes nothing. A row the reminder cannot be written
 * for (unknown currency, an amount that is not positive) is that row's failure, numbered by its
 * place in the list and naming the invoice; every other row is still processed.
 */
export const overdueInvoices: Processor = async ({ run, loop }) => {
  const parsed = overdueSweepParamsSchema.safeParse(run.params);
  if (!parsed.success) throw new JobFailed("The sweep's list of invoices is missing or unreadable; start a new sweep.");
  const { asOf, invoiceIds } = parsed.data;
  const dueBefore = new Date(`${asOf}T00:00:00Z`);

  await forEachItem(loop, invoiceIds, async (id) => {
    const invoice = await db().invoice.findUnique({
      where: { id },
      select: { number: true, amountMinor: true, currency: true, dueDate: true, status: true },
    });
    // Gone, paid or already overdue since the list was made: nothing to do, and nothing to redo.
    if (invoice?.status !== "open" || invoice.dueDate >= dueBefore) return (tx) => count(tx, run.jobId, "unchanged");
    const reminder = formatReminder(invoice, asOf);
    // Checked before it is written: a text the database cannot hold fails this invoice alone.
    const unstorable = textProblem(reminder);
    if (unstorable) throw new ItemError(`invoice ${invoice.number.slice(0, 40)}: its reminder ${unstorable}`);
    return async (tx) => {
      const { count: marked } = await tx.invoice.updateMany({
        where: { id, status: "open" },
        data: { status: "overdue", overdueAt: new Date(), reminder },
      });
      await count(tx, run.jobId, marked === 1 ? "markedOverdue" : "unchanged");
    };
  });

  const row = await db().job.findUnique({ where: { id: run.jobId }, select: { result: true } });
  const tally = tallySchema.safeParse(row?.result ?? {});
  const markedOverdue = (tally.success ? tally.data.markedOverdue : undefined) ?? 0;
  const unchanged = (tally.success ? tally.data.unchanged : undefined) ?? 0;
  return {
    result: { asOf, markedOverdue, unchanged },
    message: (final) => {
      if (final.total === 0) return `No invoice was due before ${asOf}.`;
      const parts = [`Marked ${countLabel(markedOverdue, "invoice")} overdue`];
      if (unchanged > 0) parts.push(`${countLabel(unchanged, "invoice")} needed nothing (paid or already overdue)`);
      if (final.failed > 0) parts.push(`${countLabel(final.failed, "invoice")} could not be marked${SEE_THE_LIST}`);
      return `${parts.join("; ")}.`;
    },
  };
};
