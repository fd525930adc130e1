import { Readable } from "node:stream";
import { parse } from "csv-parse";
import { db } from "@/lib/db/client";
import { REQUIRED_COLUMNS } from "@/lib/imports/inspect-upload";
import { rowProblem, transactionRowSchema } from "@/lib/imports/rows";
import { commitItem, countLabel, finishJob } from "@/lib/jobs/run";
import { ModelCallError } from "@/lib/modelcalls/errors";
import { chooseCategory } from "@/lib/modelcalls/choose-category";
import type { Processor } from "../runtime";

/**
 * `csv_import`: streams the stored file, validates each row, asks the model for a category and
 * writes a Transaction. A bad row is recorded and skipped; the import goes on. A new attempt
 * resumes at the cursor, so rows already done are not read again.
 */
export const csvImport: Processor = async ({ run, signal, log }) => {
  const upload = await db().upload.findUnique({ where: { jobId: run.jobId }, select: { content: true, delimiter: true } });
  if (!upload) {
    await finishJob(run.jobId, run.attempt, "failed", "The uploaded file is missing, so the import cannot run. Upload the file again.");
    return;
  }
  const categories = await db().category.findMany({ select: { id: true, slug: true, name: true }, orderBy: { id: "asc" } });
  const categoryIds = new Map(categories.map((c) => [c.slug, c.id]));

  const parser = Readable.from([Buffer.from(upload.content)]).pipe(
    parse({ bom: true, delimiter: upload.delimiter, relax_column_count: true, skip_empty_lines: true, skip_records_with_empty_values: true }),
  );

  let header: string[] | null = null;
  let index = 0; // data rows seen, the unit of the cursor
  let processed = run.processed;
  let failed = run.failed;
  for await (const record of parser as AsyncIterable<string[]>) {
    if (!header) {
      header = record.map((c) => c.trim().toLowerCase());
      continue;
    }
    index += 1;
    if (index <= run.cursor) continue;
    signal.throwIfAborted();
    // The row number a person sees in a spreadsheet: the header is row 1, a quoted multi-line
    // field stays one row, blank lines are not rows.
    const row = index + 1;

    if (record.length !== header.length) {
      await commitItem(run.jobId, run.attempt, index, {
        ok: false,
        row,
        reason: `row has ${record.length} field${record.length === 1 ? "" : "s"}, expected ${header.length}`,
      });
      failed += 1;
      continue;
    }
    const fields = Object.fromEntries(REQUIRED_COLUMNS.map((c) => [c, record[header!.indexOf(c)]]));
    const parsed = transactionRowSchema.safeParse(fields);
    if (!parsed.success) {
      await commitItem(run.jobId, run.attempt, index, { ok: false, row, reason: rowProblem(parsed.error) });
      failed += 1;
      continue;
    }
    const tx = parsed.data;
    let slug: string;
    try {
      slug = await chooseCategory({
        transaction: { ...tx, amount: (Number(tx.amount) / 100).toFixed(2) },
        categories,
        signal,
        context: { queue: run.queue, jobKind: run.kind, jobId: run.jobId },
      });
    } catch (err) {
      if (!(err instanceof ModelCallError)) throw err;
      log.warn({ row, err: err.message }, "category model call failed for row");
      await commitItem(run.jobId, run.attempt, index, { ok: false, row, reason: "could not be categorised: the model service did not answer" });
      failed += 1;
      continue;
    }
    await commitItem(run.jobId, run.attempt, index, {
      ok: true,
      effect: (t) =>
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
        }),
    });
    processed += 1;
  }

  const summary = `processed=${processed} failed=${failed}`;
  if (failed > 0) log.warn({ processed, failed }, summary);
  else log.info({ processed, failed }, summary);
  const total = processed + failed;
  await finishJob(
    run.jobId,
    run.attempt,
    failed > 0 ? "completed_with_errors" : "completed",
    failed > 0
      ? `Imported ${processed.toLocaleString("en-US")} of ${countLabel(total, "row")}; ${countLabel(failed, "row")} could not be imported (see the list below).`
      : total === 1 ? "Imported the 1 row." : `Imported all ${countLabel(total, "row")}.`,
  );
};
