import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { startImportHarness } from "@/test/helpers/import-harness";

/**
 * Poison input through a real import (the upload, the worker's row validation, the model
 * simulator, the database): whatever a row holds, the import never fails as a whole because of
 * it; every row is imported or failed with a reason, and the counts add up.
 */
const h = await startImportHarness();
const { db } = h.m.db;
afterAll(() => h.close());

const extremeAmounts = fc.constantFrom(
  "1e23",
  "-0",
  "0.00",
  "NaN",
  "-NaN",
  "Infinity",
  "1e-30",
  "0.001",
  "100000000000000000000000",
  "9223372036854775807",
  "92233720368547758.07",
  "-92233720368547758.08",
  "92233720368547758.08",
  "1.234,56",
  "-12.50",
  " 7 ",
  "",
);
const amount = fc.oneof(extremeAmounts, fc.stringMatching(/^-?\d{1,30}([.,]\d{1,3})?$/));
const extremeDates = fc.constantFrom(
  "0000-01-01",
  "9999-12-31",
  "275760-09-13",
  "-000001-01-01",
  "2026-02-30",
  "2026-13-01",
  "1899-12-31",
  "1900-01-01",
  "2199-12-31",
  "2200-01-01",
  "2026-3-4",
  "",
);
const date = fc.oneof(
  extremeDates,
  fc
    .date({ min: new Date("1800-01-01"), max: new Date("2300-01-01"), noInvalidDate: true })
    .map((d) => d.toISOString().slice(0, 10)),
);
const oddText = fc.constantFrom(
  "\u0000",
  "a\u0000b",
  "line\rbreak",
  "line\nbreak",
  "para\u2028graph",
  "\u202Eevil RTL override",
  "مرحبا بالعالم",
  "e\u0301\u0301\u0301 combining",
  "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀👩‍👩‍👧",
  "lone \ud800 high",
  "lone \udc00 low",
  "\ufeffBOM inside",
  '"quoted", with, commas',
  "\t\v\f\u0007",
  "x".repeat(501),
  "",
);
const text = fc.oneof(
  oddText,
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 20 }),
  fc.string({ maxLength: 20 }),
);
const currency = fc.constantFrom("EUR", "usd", "XXX", "", "EUR\u0000");
/**
 * A row that is good but for one or two fields, which take an extreme value: a row that is wrong
 * everywhere would be refused for its first problem only, and the others would never be tried.
 */
const good = {
  date: "2026-03-04",
  amount: "-12.50",
  currency: "EUR",
  counterparty: "REWE Markt",
  description: "card payment",
};
const poison = fc.oneof(
  amount.map((amount) => ({ amount })),
  date.map((date) => ({ date })),
  currency.map((currency) => ({ currency })),
  text.map((counterparty) => ({ counterparty })),
  text.map((description) => ({ description })),
);
const row = fc.tuple(poison, fc.option(poison, { nil: {} })).map(([a, b]) => ({ ...good, ...b, ...a }));

/** A CSV field, always quoted (quotes doubled), so that separators and line breaks stay inside it. */
const field = (value: string) => `"${value.replaceAll('"', '""')}"`;

describe("csv_import with poison rows (real database, property)", () => {
  it("never fails as a whole because of a row; every row is imported or failed with a reason; the counts add up", async () => {
    let imports = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(row, { minLength: 1, maxLength: 6 }), async (rows) => {
        // A good row first: the file's header and first line are never the only thing on trial.
        const lines = [
          ["2026-03-04", "-1.00", "EUR", "REWE Markt", "anchor"],
          ...rows.map((r) => [r.date, r.amount, r.currency, r.counterparty, r.description]),
        ];
        let jobId: string;
        try {
          jobId = await h.importOf(lines.length, `poison-${imports++}`, (i) => lines[i - 1]!.map(field).join(","));
        } catch (err) {
          // The upload itself may be refused (a NUL byte is binary data): a clear reason, nothing created.
          expect((err as Error).message).toMatch(/NUL byte|binary data/);
          return;
        }
        const result = await h.run(jobId);
        expect(result).toBeUndefined();
        const job = await db().job.findUniqueOrThrow({
          where: { id: jobId },
          select: { status: true, total: true, processed: true, failed: true },
        });
        expect(["completed", "completed_with_errors"]).toContain(job.status);
        expect(job.processed + job.failed).toBe(job.total);
        expect(job.processed).toBeGreaterThanOrEqual(1);
        expect(await db().transaction.count({ where: { jobId } })).toBe(job.processed);
        const failures = await db().jobItemFailure.findMany({ where: { jobId }, select: { reason: true } });
        expect(failures).toHaveLength(job.failed);
        for (const f of failures) expect(f.reason.length).toBeGreaterThan(3);
      }),
      { numRuns: 25, endOnFailure: true },
    );
  }, 180_000);
});
