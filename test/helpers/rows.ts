import { db } from "@/lib/db/client";

/** A row's record of where its category came from, as an import writes it (lib/imports/write-rows.ts). */
export function answerUseOf(jobId: string, row: number) {
  return db().categoryAnswerUse.create({
    data: {
      jobId,
      row,
      jobKind: "csv_import",
      source: "model",
      model: "m",
      promptTokens: 1,
      completionTokens: 1,
      callShare: 1,
    },
  });
}

/** An imported transaction of `jobId`'s row `row`, with the text a search reads. */
export function transactionOf(
  tenantId: string,
  jobId: string,
  row: number,
  text: { counterparty?: string; description?: string } = {},
) {
  return db().transaction.create({
    data: {
      tenantId,
      jobId,
      row,
      date: new Date("2026-01-01"),
      amountMinor: 100n,
      currency: "EUR",
      counterparty: text.counterparty ?? "c",
      description: text.description ?? "d",
      categoryId: 1,
    },
  });
}
