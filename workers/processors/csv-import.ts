import { Readable } from "node:stream";
import { parse } from "csv-parse";
import { getCategories } from "@/lib/categories/cache";
import { db } from "@/lib/db/client";
import { ItemError, JobFailed } from "@/lib/jobs/errors";
import { forEachItem } from "@/lib/jobs/for-each-item";
import { itemSourceOf } from "@/lib/jobs/parts";
import { countLabel } from "@/lib/jobs/messages";
import { REQUIRED_COLUMNS } from "@/lib/imports/inspect-upload";
import { rowProblem, transactionRowSchema } from "@/lib/imports/rows";
import { ModelCallError } from "@/lib/modelcalls/errors";
import { createCategoriser } from "@/lib/modelcalls/categoriser";
import { KINDS } from "@/lib/queues/catalog";
import type { Processor } from "../processor";

/**
 * `csv_import`: streams the stored file, validates each row, asks the model for a category and
 * writes a Transaction. A bad row is recorded and skipped; the import goes on. A new attempt
 * resumes at the cursor, so rows already done are not redone.
 */
export const csvImport: Processor = async ({ run, signal, loop }) => {
  // A part of a split import reads the rows of the file uploaded for the job it was split from.
  const upload = await db().upload.findUnique({ where: { jobId: itemSourceOf(run) }, select: { content: true, delimiter: true } });
  if (!upload) throw new JobFailed("The uploaded file is missing, so the import cannot run. Upload the file again.");
  const categories = await getCategories();
  const categoryIds = new Map(categories.map((c) => [c.slug, c.id]));

  const records = Readable.from([Buffer.from(upload.content)]).pipe(
    parse({ bom: true, delimiter: upload.delimiter, relax_column_count: true, skip_empty_lines: true, skip_records_with_empty_values: true }),
  ) as AsyncIterable<string[]>;

  let header: string[] | undefined;
  async function* dataRows() {
    for await (const record of records) {
      if (!header) header = record.map((c) => c.trim().toLowerCase());
      else yield record;
    }
  }

  // Rows in flight at once ask for their categories together: one model call per batch — never
  // larger than the rows that can be in flight, or every batch would wait out its linger for rows
  // that cannot come. Closed when the loop ends, however it ends, so nothing keeps listening to
  // the job's signal.
  const categoriser = createCategoriser({
    categories,
    batchSize: Math.max(1, Math.min(KINDS.csv_import.modelBatch.size, loop.concurrency ?? 1)),
    signal,
    context: { queue: run.queue, jobKind: run.kind, jobId: run.jobId },
  });

  // The row number a person sees in a spreadsheet: the header is row 1, a quoted multi-line field
  // stays one row, blank lines are not rows.
  await forEachItem(
    loop,
    dataRows(),
    async (record, { row }) => {
      const columns = header!;
      if (record.length !== columns.length) {
        throw new ItemError(`row has ${record.length} field${record.length === 1 ? "" : "s"}, expected ${columns.length}`);
      }
      const parsed = transactionRowSchema.safeParse(Object.fromEntries(REQUIRED_COLUMNS.map((c) => [c, record[columns.indexOf(c)]])));
      if (!parsed.success) throw new ItemError(rowProblem(parsed.error));
      const tx = parsed.data;
      let slug: string;
      try {
        slug = await categoriser.categorise({ ...tx, amount: (Number(tx.amount) / 100).toFixed(2) }, row);
      } catch (err) {
        if (err instanceof ModelCallError) throw new ItemError("could not be categorised: the model service did not answer");
        throw err;
      }
      return (t) =>
        t.transaction.create({
          data: {
            tenantId: run.tenantId,
            jobId: run.jobId,
            row,
            date: new Date(`${tx.date}T00:00:00Z`),
            amountMinor: tx.amount,
            currency: tx.currency,
            counterparty: tx.counterparty,
            description: tx.description,
            categoryId: categoryIds.get(slug) ?? categoryIds.get("other")!,
          },
        });
    },
    (index) => index + 1,
  ).finally(() => categoriser.close());

  return {
    message: (row) => {
      const total = row.processed + row.failed;
      return row.failed > 0
        ? `Imported ${row.processed.toLocaleString("en-US")} of ${countLabel(total, "row")}; ${countLabel(row.failed, "row")} could not be imported (see the list below).`
        : total === 1
          ? "Imported the 1 row."
          : `Imported all ${countLabel(total, "row")}.`;
    },
  };
};
