import { formatCount } from "@/lib/format/number";
import { getCategories, type Category } from "@/lib/categories/cache";
import { db } from "@/lib/db/client";
import { ItemError, JobFailed } from "@/lib/core/signals";
import { forEachItem } from "@/lib/runs/for-each-item";
import { itemSourceOf } from "@/lib/jobs/parts";
import { countLabel, SEE_THE_LIST } from "@/lib/jobs/messages";
import { ModelCallError } from "@/lib/modelcalls/errors";
import { createCategoriser } from "@/lib/modelcalls/categoriser";
import { createJobAnswers, type JobAnswers } from "@/lib/answers/job";
import { categoryAnswerKey } from "@/lib/answers/key";
import * as batchService from "@/lib/modelcalls/batch-service";
import { env } from "@/lib/env";
import type { Categoriser, RowAnswer } from "@/lib/modelcalls/categoriser";
import { buildCategoryPrompt, parseCategoryAnswer, type CategoryChoice } from "@/lib/modelcalls/choose-category";
import { throughBatchLane, type BatchAnswer, type LaneItem } from "@/lib/runs/batch-lane";
import { committedItems } from "@/lib/runs/commit";
import type { RunStart } from "@/lib/runs/attempt";
import { KINDS } from "@/lib/catalog/catalog";
import type { RunContext, RunResult } from "@/lib/runs/processor";
import { checkRow, questionOf, uploadRows, type UploadRow } from "./csv-rows";
import { storedUpload, type StoredUpload } from "./stored-upload";
import { importedRowsOf } from "./write-rows";

/**
 * `csv_import`: streams the stored file, validates each row, asks the model for a category (once
 * per question: rows with the same question share one answer, and the tenant's stored answers are
 * reused — lib/answers) and writes a Transaction with the record of where its category came from.
 * A bad row is recorded and skipped; the import goes on. A new attempt resumes at the cursor, so
 * rows already done are not redone.
 */
export async function runImport({ run, signal, loop, log }: RunContext): Promise<RunResult> {
  const categories = await getCategories();
  // With room in its budget the job's rows that still need the model go to the provider's batch
  // service first (lib/runs/batch-lane.ts): this run may give its slot back here, before it reads
  // the file, so a wake-up that only looks at the batch stays cheap. The batch's answers are then
  // this run's answers for those rows, and the rest is asked directly. The lane is the primary
  // provider's Batch API: its answers are the primary's model's.
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
    categoriser: batchFirst(categoriser, fromBatch, categories, model),
  });

  await forEachItem(loop, uploadRows(upload), importRow(run, answers, categories), (index) => index + 1).finally(() =>
    categoriser.close(),
  );

  return { message: importMessage };
}

/** An ended import's message, from its counts: "Imported 86 of 88 rows; 2 rows could not be imported (see the list below)." */
export function importMessage(row: { processed: number; failed: number }): string {
  const total = row.processed + row.failed;
  return row.failed > 0
    ? `Imported ${formatCount(row.processed)} of ${countLabel(total, "row")}; ${countLabel(row.failed, "row")} could not be imported${SEE_THE_LIST}.`
    : total === 1
      ? "Imported the 1 row."
      : `Imported all ${countLabel(total, "row")}.`;
}

/**
 * One row: validated (its own problem is its failure), categorised (once per question), and its
 * writes handed to the commit. A refusal of the row's question for good (its length, its
 * content) is the row's own; any other failure of the model's is not (lib/runs/item-fault.ts).
 */
function importRow(run: RunStart, answers: JobAnswers, categories: Category[]) {
  const categoryIds = new Map(categories.map((c) => [c.slug, c.id]));
  const importedRow = importedRowsOf(run);
  return async ({ record, columns, row }: UploadRow & { columns: string[] }) => {
    const checked = checkRow(record, columns);
    if (!checked.ok) throw new ItemError(checked.problem);
    const tx = checked.transaction;
    const answer = await answers.answer(questionOf(tx), row).catch(refusedForGood);
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
  };
}

/**
 * A model call's failure as a row sees it: a refusal of the row's question for good (its length,
 * its content) is the row's own failure; any other is not the row's, and goes on as it is.
 */
export function refusedForGood(err: unknown): never {
  if (err instanceof ModelCallError && !err.retryable)
    throw new ItemError(`could not be categorised: the model service refused it (HTTP ${err.status ?? "error"})`);
  throw err;
}

/** The stored file; a part of a split import reads the file uploaded for the job it was split from. */
async function uploadOf(run: RunStart): Promise<StoredUpload> {
  const upload = await storedUpload(itemSourceOf(run));
  if (!upload) throw new JobFailed("The uploaded file is missing, so the import cannot run. Upload the file again.");
  return upload;
}

/**
 * The rows the batch lane sends, each with the single-row prompt the direct path sends for a row
 * on its own: valid rows not committed yet, one per question (rows with the same question share
 * its answer, lib/answers), leaving out questions the tenant's stored answers already answer —
 * every valid row when reuse is off (`BOUNDED_CATEGORY_ANSWER_REUSE=0`).
 */
async function rowsNeedingTheModel(
  run: RunStart,
  upload: StoredUpload,
  categories: CategoryChoice[],
  model: string,
): Promise<LaneItem[]> {
  const committed = new Set(await committedItems(run.jobId, run.cursor));
  const reuse = env().BOUNDED_CATEGORY_ANSWER_REUSE;
  const asked = new Map<string, LaneItem>();
  for await (const { index, row, record, columns } of uploadRows(upload)) {
    if (index <= run.cursor || committed.has(index)) continue;
    const checked = checkRow(record, columns);
    if (!checked.ok) continue;
    const transaction = questionOf(checked.transaction);
    const key = reuse ? categoryAnswerKey({ transaction, categories, model }) : String(index);
    if (!asked.has(key)) asked.set(key, { row, messages: buildCategoryPrompt(transaction, categories) });
  }
  if (asked.size === 0 || !reuse) return [...asked.values()];
  const stored = await db().$queryRaw<{ key: string }[]>`
    SELECT key FROM "CategoryAnswer"
    WHERE "tenantId" = ${run.tenantId}::uuid AND key = ANY(${[...asked.keys()]}::text[]) AND "expiresAt" > now()`;
  for (const { key } of stored) asked.delete(key);
  return [...asked.values()];
}

/**
 * The categoriser, answering first from the batch's answers (a row's answer is read as a direct
 * single-row answer is), which are `batchModel`'s: the primary's, whose Batch API the lane uses.
 */
function batchFirst(
  categoriser: Categoriser,
  fromBatch: Map<number, BatchAnswer>,
  categories: CategoryChoice[],
  batchModel: string,
): Pick<Categoriser, "model" | "answer"> {
  const slugs = categories.map((c) => c.slug);
  return {
    model: categoriser.model,
    answer: (transaction, row) => {
      const answer = fromBatch.get(row);
      if (!answer) return categoriser.answer(transaction, row);
      const answered: RowAnswer = {
        slug: parseCategoryAnswer(answer.content, slugs),
        model: batchModel,
        promptTokens: answer.promptTokens,
        completionTokens: answer.completionTokens,
        callShare: 1 / fromBatch.size,
      };
      return Promise.resolve(answered);
    },
  };
}
