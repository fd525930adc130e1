import { getCategories, type Category } from "@/lib/categories/cache";
import { KINDS } from "@/lib/catalog/catalog";
import { ItemError, JobFailed } from "@/lib/core/signals";
import { db } from "@/lib/db/client";
import { checkRow, questionOf, uploadRows } from "@/lib/imports/csv-rows";
import { importMessage, refusedForGood } from "@/lib/imports/run-import";
import type { TransactionRow } from "@/lib/imports/rows";
import { storedUpload } from "@/lib/imports/stored-upload";
import { countLabel } from "@/lib/jobs/messages";
import { itemSourceOf, partOf } from "@/lib/jobs/parts";
import { providerOfName } from "@/lib/model-providers";
import { createCategoriser, type RowAnswer } from "@/lib/modelcalls/categoriser";
import { groupedWrite } from "@/lib/runs/commit";
import { forEachItem } from "@/lib/runs/for-each-item";
import type { RunContext, RunResult } from "@/lib/runs/processor";
import { reaskParamsSchema, type ReaskParams } from "./reask";

/**
 * `category_reask`: asks an import's chosen rows again on one provider (its route that provider
 * alone: it never fails over), a batch of rows a call as the import asked them. A row the import
 * answered keeps its earlier answer beside the new one (`CategoryReask`) and takes the new
 * category; a row that had failed is read again from the stored file — valid now, it is imported
 * (its Transaction written, its failure removed, the import's counts and message made true); still
 * invalid, it is this job's failed row with the same reason. A resume asks only the rows not
 * committed yet: the rows are the job's own list, fixed when it was made.
 */
export async function runReask({ run, signal, loop }: RunContext): Promise<RunResult> {
  const params = reaskParamsSchema.parse(run.params);
  const provider = providerOfName(params.provider);
  if (!provider)
    throw new JobFailed(
      `The model provider "${params.provider}" is no longer configured (BOUNDED_MODEL_PROVIDERS): ask the rows again on one that is.`,
    );
  const categories = await getCategories();
  // A part of a split import: its rows are read from the file of the job it was split from, and
  // its items are counted from the start of its range.
  const { params: sourceParams } = await db().job.findUniqueOrThrow({
    where: { id: params.sourceJobId },
    select: { params: true },
  });
  const source = { jobId: params.sourceJobId, params: sourceParams };
  const questions = await questionsOf(params, itemSourceOf(source));
  const categoriser = createCategoriser({
    categories,
    batchSize: Math.max(1, Math.min(KINDS.category_reask.modelBatch.size, loop.concurrency ?? 1)),
    signal,
    route: [provider],
    context: { queue: run.queue, jobKind: run.kind, jobId: run.jobId },
  });
  const itemOfRow = (row: number) => row - 1 - (partOf(sourceParams)?.from ?? 0);
  const write = reaskWrites(run, params, categories, itemOfRow);
  await forEachItem(
    loop,
    params.list,
    async (row) => {
      const question = questions.get(row);
      if (!question) throw new ItemError("is no longer in the import (its rows were removed)");
      if (!question.ok) throw new ItemError(question.problem);
      const answer = await categoriser.answer(questionOf(question.transaction), row).catch(refusedForGood);
      return write({ row, previous: question.previous, transaction: question.transaction, answer });
    },
    (index) => params.list[index - 1]!,
  ).finally(() => categoriser.close());
  await noteOnImport(run.jobId, params, provider.name);
  return {
    message: (row) =>
      `Asked ${countLabel(row.processed, "row")} of import ${params.sourceJobId} again on ${provider.name} (${provider.model})${
        row.failed > 0 ? `; ${countLabel(row.failed, "row")} could not be asked (see the list below)` : ""
      }.`,
  };
}

/** A row to ask again: the transaction it holds and its earlier answer (none for a row that had failed), or why it is invalid. */
type Question =
  | { ok: true; transaction: TransactionRow; previous: { slug: string; model: string | null } | null }
  | { ok: false; problem: string };

/**
 * Each listed row's question: the import's Transaction for a row it answered (one query), the
 * stored file's record for a row that had failed (one pass over the file, only when there is one).
 */
async function questionsOf(params: ReaskParams, uploadOf: string): Promise<Map<number, Question>> {
  const answered = await db().$queryRaw<
    {
      row: number;
      date: Date;
      amountMinor: bigint;
      currency: string;
      counterparty: string;
      description: string;
      slug: string;
      model: string | null;
    }[]
  >`
    SELECT t.row, t.date, t."amountMinor", t.currency, t.counterparty, t.description, c.slug, u.model
    FROM "Transaction" t
    JOIN "Category" c ON c.id = t."categoryId"
    LEFT JOIN "CategoryAnswerUse" u ON u."jobId" = t."jobId" AND u.row = t.row
    WHERE t."jobId" = ${params.sourceJobId}::uuid AND t.row = ANY(${params.list}::int[])`;
  const questions = new Map<number, Question>();
  for (const r of answered)
    questions.set(r.row, {
      ok: true,
      transaction: {
        date: r.date.toISOString().slice(0, 10),
        amount: r.amountMinor,
        currency: r.currency as TransactionRow["currency"],
        counterparty: r.counterparty,
        description: r.description,
      },
      previous: { slug: r.slug, model: r.model },
    });
  const unanswered = new Set(params.list.filter((row) => !questions.has(row)));
  if (unanswered.size === 0) return questions;
  const upload = await storedUpload(uploadOf);
  if (!upload)
    throw new JobFailed(
      "The import's uploaded file is gone, so its failed rows cannot be read again: upload it again.",
    );
  for await (const { row, record, columns } of uploadRows(upload)) {
    if (!unanswered.has(row)) continue;
    const checked = checkRow(record, columns);
    questions.set(row, checked.ok ? { ok: true, transaction: checked.transaction, previous: null } : checked);
  }
  return questions;
}

interface AskedAgain {
  row: number;
  previous: { slug: string; model: string | null } | null;
  transaction: TransactionRow;
  answer: RowAnswer;
}

/**
 * A row's writes, grouped with the other rows of its commit: its `CategoryReask`; for a row the
 * import answered, the new category on its Transaction and the new model on its CategoryAnswerUse;
 * for a row that had failed, the row imported as the import would have (Transaction,
 * CategoryAnswerUse), its failure removed and the import's counts, status and message set to match.
 */
function reaskWrites(
  run: { jobId: string; tenantId: string },
  params: ReaskParams,
  categories: Category[],
  itemOfRow: (row: number) => number,
) {
  const categoryIds = new Map(categories.map((c) => [c.slug, c.id]));
  const idOf = (slug: string) => categoryIds.get(slug) ?? categoryIds.get("other")!;
  const source = params.sourceJobId;
  return groupedWrite(async (t, rows: AskedAgain[]) => {
    const now = new Date().toISOString();
    await t.$executeRaw`
      INSERT INTO "CategoryReask" ("jobId", "sourceJobId", row, "previousSlug", "previousModel", provider, model, slug, "createdAt")
      SELECT ${run.jobId}::uuid, ${source}::uuid, r, ps, pm, ${params.provider}, m, s, ${now}::timestamptz AT TIME ZONE 'UTC'
      FROM unnest(${rows.map((r) => r.row)}::int[], ${rows.map((r) => r.previous?.slug ?? null)}::text[],
        ${rows.map((r) => r.previous?.model ?? null)}::text[], ${rows.map((r) => r.answer.model)}::text[],
        ${rows.map((r) => r.answer.slug)}::text[]) AS u(r, ps, pm, m, s)
      ON CONFLICT DO NOTHING`;
    const uses = (list: AskedAgain[]) => ({
      rows: list.map((r) => r.row),
      models: list.map((r) => r.answer.model),
      prompt: list.map((r) => Math.round(r.answer.promptTokens)),
      completion: list.map((r) => Math.round(r.answer.completionTokens)),
      share: list.map((r) => r.answer.callShare),
    });
    const answered = rows.filter((r) => r.previous);
    if (answered.length > 0) {
      const u = uses(answered);
      await t.$executeRaw`
        UPDATE "Transaction" t SET "categoryId" = u.cat
        FROM unnest(${u.rows}::int[], ${answered.map((r) => idOf(r.answer.slug))}::int[]) AS u(r, cat)
        WHERE t."jobId" = ${source}::uuid AND t.row = u.r`;
      await t.$executeRaw`
        UPDATE "CategoryAnswerUse" a SET source = 'model', model = u.m, "promptTokens" = u.p, "completionTokens" = u.c, "callShare" = u.share
        FROM unnest(${u.rows}::int[], ${u.models}::text[], ${u.prompt}::int[], ${u.completion}::int[], ${u.share}::float8[])
          AS u(r, m, p, c, share)
        WHERE a."jobId" = ${source}::uuid AND a.row = u.r`;
    }
    const recovered = rows.filter((r) => !r.previous);
    if (recovered.length > 0)
      await importRecovered(t, { tenantId: run.tenantId, source, itemOfRow, now }, recovered, idOf, uses(recovered));
  });
}

/** Rows that had failed, imported now: as the import writes a row, then its failure gone and its counts and message true. */
async function importRecovered(
  t: Parameters<Parameters<typeof groupedWrite>[0]>[0],
  {
    tenantId,
    source,
    itemOfRow,
    now,
  }: { tenantId: string; source: string; itemOfRow: (row: number) => number; now: string },
  rows: AskedAgain[],
  idOf: (slug: string) => number,
  u: { rows: number[]; models: string[]; prompt: number[]; completion: number[]; share: number[] },
): Promise<void> {
  const tx = rows.map((r) => r.transaction);
  await t.$executeRaw`
    INSERT INTO "Transaction" ("tenantId", "jobId", row, date, "amountMinor", currency, counterparty, description, "categoryId", "createdAt")
    SELECT ${tenantId}::uuid, ${source}::uuid, r, d, a, c, cp, de, cat, ${now}::timestamptz AT TIME ZONE 'UTC'
    FROM unnest(${u.rows}::int[], ${tx.map((x) => x.date)}::date[], ${tx.map((x) => x.amount.toString())}::bigint[],
      ${tx.map((x) => x.currency)}::bpchar[], ${tx.map((x) => x.counterparty)}::text[], ${tx.map((x) => x.description)}::text[],
      ${rows.map((r) => idOf(r.answer.slug))}::int[]) AS u(r, d, a, c, cp, de, cat)
    ON CONFLICT ("jobId", row) DO NOTHING`;
  await t.$executeRaw`
    INSERT INTO "CategoryAnswerUse" ("jobId", row, "jobKind", source, model, "promptTokens", "completionTokens", "callShare", "createdAt")
    SELECT ${source}::uuid, r, 'csv_import', 'model', m, p, c, share, ${now}::timestamptz AT TIME ZONE 'UTC'
    FROM unnest(${u.rows}::int[], ${u.models}::text[], ${u.prompt}::int[], ${u.completion}::int[], ${u.share}::float8[])
      AS u(r, m, p, c, share)
    ON CONFLICT DO NOTHING`;
  const gone = await t.$executeRaw`
    DELETE FROM "JobItemFailure" WHERE "jobId" = ${source}::uuid AND row = ANY(${u.rows}::int[])`;
  await t.$executeRaw`
    UPDATE "JobItem" SET ok = true WHERE "jobId" = ${source}::uuid AND item = ANY(${u.rows.map(itemOfRow)}::int[])`;
  if (gone === 0) return;
  const [counts] = await t.$queryRaw<{ processed: number; failed: number; status: string }[]>`
    SELECT processed + ${gone}::int AS processed, failed - ${gone}::int AS failed, status::text FROM "Job"
    WHERE id = ${source}::uuid FOR UPDATE`;
  // A part's counts roll up into the job it was split from, as its commits' do.
  await t.$executeRaw`
    UPDATE "Job" p SET processed = p.processed + ${gone}::int, failed = p.failed - ${gone}::int
    FROM "Job" c WHERE c.id = ${source}::uuid AND p.id = c."parentId"`;
  // An import that completed says what it imported; one that ended otherwise keeps its own words.
  const { processed, failed } = counts!;
  const completed = counts!.status === "completed" || counts!.status === "completed_with_errors";
  await t.$executeRaw`
    UPDATE "Job" SET processed = ${processed}, failed = ${failed},
      status = CASE WHEN ${completed} THEN ${failed === 0 ? "completed" : "completed_with_errors"}::"JobStatus" ELSE status END,
      message = CASE WHEN ${completed} THEN ${importMessage({ processed, failed })} ELSE message END
    WHERE id = ${source}::uuid`;
}

/**
 * The import's timeline says its rows were asked again (and the event is what tells the
 * customer's page to read its rows anew: lib/progress/snapshot.ts).
 */
async function noteOnImport(reaskJobId: string, params: ReaskParams, provider: string): Promise<void> {
  const [counts] = await db().$queryRaw<{ asked: number; changed: number }[]>`
    SELECT count(*)::int AS asked, count(*) FILTER (WHERE slug IS DISTINCT FROM "previousSlug")::int AS changed
    FROM "CategoryReask" WHERE "jobId" = ${reaskJobId}::uuid`;
  const { asked, changed } = counts!;
  await db().jobEvent.create({
    data: {
      jobId: params.sourceJobId,
      type: "reask",
      attempt: 0,
      message: `${countLabel(asked, "row")} asked again on ${provider} (job ${reaskJobId}); ${countLabel(changed, "row")} got another answer.`,
    },
  });
}
