import { formatCount } from "@/lib/format/number";
import { Readable } from "node:stream";
import { parse } from "csv-parse";
import { getCategories } from "@/lib/categories/cache";
import { db } from "@/lib/db/client";
import { ItemError, JobFailed } from "@/lib/core/signals";
import { forEachItem } from "@/lib/runs/for-each-item";
import { itemSourceOf } from "@/lib/jobs/parts";
import { countLabel } from "@/lib/jobs/messages";
import { REQUIRED_COLUMNS } from "@/lib/imports/inspect-upload";
import { rowProblem, transactionRowSchema } from "@/lib/imports/rows";
import { ModelCallError } from "@/lib/modelcalls/errors";
import { createCategoriser } from "@/lib/modelcalls/categoriser";
import { createJobAnswers, type AnswerSource } from "@/lib/answers/job";
import { categoryAnswerKey } from "@/lib/answers/key";
import * as batchService from "@/lib/modelcalls/batch-service";
import { env } from "@/lib/env";
import type { Categoriser, RowAnswer } from "@/lib/modelcalls/categoriser";
import { buildCategoryPrompt, parseCategoryAnswer, type CategoryChoice } from "@/lib/modelcalls/choose-category";
import { throughBatchLane, type BatchAnswer, type LaneItem } from "@/lib/runs/batch-lane";
import { committedItems, groupedWrite } from "@/lib/runs/commit";
import type { RunStart } from "@/lib/runs/attempt";
import { KINDS } from "@/lib/catalog/catalog";
import type { Processor } from "@/lib/runs/processor";

/**
 * `csv_import`: streams the stored file, validates each row, asks the model for a category (once
 * per question: rows with the same question share one answer, and the tenant's stored answers are
 * reused — lib/answers) and writes a Transaction with the record of where its category came from.
 * A bad row is recorded and skipped; the import goes on. A new attempt resumes at the cursor, so
 * rows already done are not redone.
 */
export const csvImport: Processor = async ({ run, signal, loop, log }) => {
  const categories = await getCategories();
  // With room in its budget the job's rows that still need the model go to the provider's batch
  // service first (lib/runs/batch-lane.ts): this run may give its slot back here, before it reads
  // the file, so a wake-up that only looks at the batch stays cheap. The batch's answers are then
  // this run's answers for those rows, and the rest is asked directly. The model is the one the
  // categoriser asks (its default).
  const model = env().MODEL_NAME;
  const fromBatch = await throughBatchLane({
    run,
    signal,
    log,
    service: batchService,
    model,
    items: async () => rowsNeedingTheModel(run, await uploadOf(run), categories, model),
  });
  const upload = await uploadOf(run);
  const categoryIds = new Map(categories.map((c) => [c.slug, c.id]));

  const records = recordsOf(upload);

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
  const answers = createJobAnswers({
    tenantId: run.tenantId,
    jobKind: run.kind,
    categories,
    categoriser: batchFirst(categoriser, fromBatch, categories),
  });

  const importedRow = importedRowsOf(run);

  // The row number a person sees in a spreadsheet: the header is row 1, a quoted multi-line field
  // stays one row, blank lines are not rows.
  await forEachItem(
    loop,
    dataRows(),
    async (record, { row }) => {
      const columns = header!;
      if (record.length !== columns.length) {
        throw new ItemError(
          `row has ${record.length} field${record.length === 1 ? "" : "s"}, expected ${columns.length}`,
        );
      }
      const parsed = transactionRowSchema.safeParse(
        Object.fromEntries(REQUIRED_COLUMNS.map((c) => [c, record[columns.indexOf(c)]])),
      );
      if (!parsed.success) throw new ItemError(rowProblem(parsed.error));
      const tx = parsed.data;
      let answer: Awaited<ReturnType<typeof answers.answer>>;
      try {
        answer = await answers.answer({ ...tx, amount: (Number(tx.amount) / 100).toFixed(2) }, row);
      } catch (err) {
        // The provider refused this row's question for good (its length, its content): the row's own.
        // Anything else (its errors retried and spent) is not the row's: lib/runs/item-fault.ts.
        if (err instanceof ModelCallError && !err.retryable)
          throw new ItemError(`could not be categorised: the model service refused it (HTTP ${err.status ?? "error"})`);
        throw err;
      }
      return importedRow({
        row,
        date: tx.date,
        amountMinor: tx.amount,
        currency: tx.currency,
        counterparty: tx.counterparty,
        description: tx.description,
        categoryId: categoryIds.get(answer.slug) ?? categoryIds.get("other")!,
        source: answer.source,
        model: answer.model,
        promptTokens: Math.round(answer.promptTokens),
        completionTokens: Math.round(answer.completionTokens),
        callShare: answer.callShare,
      });
    },
    (index) => index + 1,
  ).finally(() => categoriser.close());

  return {
    message: (row) => {
      const total = row.processed + row.failed;
      return row.failed > 0
        ? `Imported ${formatCount(row.processed)} of ${countLabel(total, "row")}; ${countLabel(row.failed, "row")} could not be imported (see the list below).`
        : total === 1
          ? "Imported the 1 row."
          : `Imported all ${countLabel(total, "row")}.`;
    },
  };
};

/** What an imported row writes: its Transaction, and where its category came from. */
interface ImportedRow {
  row: number;
  /** `YYYY-MM-DD`. */
  date: string;
  amountMinor: bigint;
  currency: string;
  counterparty: string;
  description: string;
  categoryId: number;
  source: AnswerSource;
  model: string;
  promptTokens: number;
  completionTokens: number;
  callShare: number;
}

/**
 * A row's writes: its Transaction, and the record of where its category came from
 * (CategoryAnswerUse). The rows of one commit are written together, one statement per table
 * (lib/runs/commit.ts `groupedWrite`); a value the database refuses fails the statement, and the
 * commit then writes its rows one by one, so only that row fails.
 */
function importedRowsOf(run: RunStart) {
  return groupedWrite(async (t, rows: ImportedRow[]) => {
    const now = new Date().toISOString();
    await t.$executeRaw`
      INSERT INTO "Transaction" ("tenantId", "jobId", row, date, "amountMinor", currency, counterparty, description,
        "categoryId", "createdAt")
      SELECT ${run.tenantId}::uuid, ${run.jobId}::uuid, r, d, a, c, cp, de, cat, ${now}::timestamptz AT TIME ZONE 'UTC'
      FROM unnest(${rows.map((r) => r.row)}::int[], ${rows.map((r) => r.date)}::date[],
        ${rows.map((r) => r.amountMinor.toString())}::bigint[], ${rows.map((r) => r.currency)}::bpchar[],
        ${rows.map((r) => r.counterparty)}::text[], ${rows.map((r) => r.description)}::text[],
        ${rows.map((r) => r.categoryId)}::int[]) AS u(r, d, a, c, cp, de, cat)`;
    await t.$executeRaw`
      INSERT INTO "CategoryAnswerUse" ("jobId", row, "jobKind", source, model, "promptTokens", "completionTokens",
        "callShare", "createdAt")
      SELECT ${run.jobId}::uuid, r, ${run.kind}, s::"AnswerSource", m, p, c, share, ${now}::timestamptz AT TIME ZONE 'UTC'
      FROM unnest(${rows.map((r) => r.row)}::int[], ${rows.map((r) => r.source)}::text[],
        ${rows.map((r) => r.model)}::text[], ${rows.map((r) => r.promptTokens)}::int[],
        ${rows.map((r) => r.completionTokens)}::int[], ${rows.map((r) => r.callShare)}::float8[])
        AS u(r, s, m, p, c, share)`;
  });
}

/** The stored file; a part of a split import reads the file uploaded for the job it was split from. */
async function uploadOf(run: RunStart): Promise<{ content: Uint8Array; delimiter: string }> {
  const upload = await db().upload.findUnique({
    where: { jobId: itemSourceOf(run) },
    select: { content: true, delimiter: true },
  });
  if (!upload) throw new JobFailed("The uploaded file is missing, so the import cannot run. Upload the file again.");
  return upload;
}

/** The stored file's records, header first. */
function recordsOf(upload: { content: Uint8Array; delimiter: string }): AsyncIterable<string[]> {
  return Readable.from([Buffer.from(upload.content)]).pipe(
    parse({
      bom: true,
      delimiter: upload.delimiter,
      relax_column_count: true,
      skip_empty_lines: true,
      skip_records_with_empty_values: true,
    }),
  ) as AsyncIterable<string[]>;
}

/**
 * The rows the batch lane sends, each with the single-row prompt the direct path sends for a row
 * on its own: valid rows not committed yet, one per question (rows with the same question share
 * its answer, lib/answers), leaving out questions the tenant's stored answers already answer —
 * every valid row when reuse is off (`BOUNDED_CATEGORY_ANSWER_REUSE=0`).
 */
async function rowsNeedingTheModel(
  run: RunStart,
  upload: { content: Uint8Array; delimiter: string },
  categories: CategoryChoice[],
  model: string,
): Promise<LaneItem[]> {
  const committed = new Set(await committedItems(run.jobId, run.cursor));
  const reuse = env().BOUNDED_CATEGORY_ANSWER_REUSE;
  const asked = new Map<string, LaneItem>();
  let header: string[] | undefined;
  let index = 0;
  for await (const record of recordsOf(upload)) {
    if (!header) {
      header = record.map((c) => c.trim().toLowerCase());
      continue;
    }
    index += 1;
    if (index <= run.cursor || committed.has(index) || record.length !== header.length) continue;
    const columns = header;
    const parsed = transactionRowSchema.safeParse(
      Object.fromEntries(REQUIRED_COLUMNS.map((c) => [c, record[columns.indexOf(c)]])),
    );
    if (!parsed.success) continue;
    const transaction = { ...parsed.data, amount: (Number(parsed.data.amount) / 100).toFixed(2) };
    const key = reuse ? categoryAnswerKey({ transaction, categories, model }) : String(index);
    if (!asked.has(key)) asked.set(key, { row: index + 1, messages: buildCategoryPrompt(transaction, categories) });
  }
  if (asked.size === 0 || !reuse) return [...asked.values()];
  const stored = await db().$queryRaw<{ key: string }[]>`
    SELECT key FROM "CategoryAnswer"
    WHERE "tenantId" = ${run.tenantId}::uuid AND key = ANY(${[...asked.keys()]}::text[]) AND "expiresAt" > now()`;
  for (const { key } of stored) asked.delete(key);
  return [...asked.values()];
}

/** The categoriser, answering first from the batch's answers (a row's answer is read as a direct single-row answer is). */
function batchFirst(
  categoriser: Categoriser,
  fromBatch: Map<number, BatchAnswer>,
  categories: CategoryChoice[],
): Pick<Categoriser, "model" | "answer"> {
  const slugs = categories.map((c) => c.slug);
  return {
    model: categoriser.model,
    answer: (transaction, row) => {
      const answer = fromBatch.get(row);
      if (!answer) return categoriser.answer(transaction, row);
      const answered: RowAnswer = {
        slug: parseCategoryAnswer(answer.content, slugs),
        promptTokens: answer.promptTokens,
        completionTokens: answer.completionTokens,
        callShare: 1 / fromBatch.size,
      };
      return Promise.resolve(answered);
    },
  };
}
