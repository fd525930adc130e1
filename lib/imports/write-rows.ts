import type { AnswerSource } from "@/lib/answers/job";
import { groupedWrite } from "@/lib/runs/commit";

/** What an imported row writes: its Transaction, and where its category came from. */
export interface ImportedRow {
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
 * commit then writes its rows one by one, so only that row fails (lib/runs/item-fault.ts).
 */
export function importedRowsOf(job: { jobId: string; tenantId: string; kind: string }) {
  return groupedWrite(async (t, rows: ImportedRow[]) => {
    const now = new Date().toISOString();
    await t.$executeRaw`
      INSERT INTO "Transaction" ("tenantId", "jobId", row, date, "amountMinor", currency, counterparty, description,
        "categoryId", "createdAt")
      SELECT ${job.tenantId}::uuid, ${job.jobId}::uuid, r, d, a, c, cp, de, cat, ${now}::timestamptz AT TIME ZONE 'UTC'
      FROM unnest(${rows.map((r) => r.row)}::int[], ${rows.map((r) => r.date)}::date[],
        ${rows.map((r) => r.amountMinor.toString())}::bigint[], ${rows.map((r) => r.currency)}::bpchar[],
        ${rows.map((r) => r.counterparty)}::text[], ${rows.map((r) => r.description)}::text[],
        ${rows.map((r) => r.categoryId)}::int[]) AS u(r, d, a, c, cp, de, cat)`;
    await t.$executeRaw`
      INSERT INTO "CategoryAnswerUse" ("jobId", row, "jobKind", source, model, "promptTokens", "completionTokens",
        "callShare", "createdAt")
      SELECT ${job.jobId}::uuid, r, ${job.kind}, s::"AnswerSource", m, p, c, share, ${now}::timestamptz AT TIME ZONE 'UTC'
      FROM unnest(${rows.map((r) => r.row)}::int[], ${rows.map((r) => r.source)}::text[],
        ${rows.map((r) => r.model)}::text[], ${rows.map((r) => r.promptTokens)}::int[],
        ${rows.map((r) => r.completionTokens)}::int[], ${rows.map((r) => r.callShare)}::float8[])
        AS u(r, s, m, p, c, share)`;
  });
}
