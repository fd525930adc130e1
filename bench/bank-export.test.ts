import { describe, expect, it } from "vitest";
import { inspectUpload } from "@/lib/imports/inspect-upload";
import { transactionRowSchema } from "@/lib/imports/rows";
import { bankExportCsv, generateBankExport } from "./bank-export";

describe("a generated bank export", () => {
  const exported = generateBankExport();
  const { rows } = exported;
  const counts = new Map<string, number>();
  for (const r of rows) counts.set(r.counterparty, (counts.get(r.counterparty) ?? 0) + 1);
  const byFrequency = [...counts.values()].sort((a, b) => b - a);

  it("is the same for the same options, and another for another seed", () => {
    expect(generateBankExport().csv).toBe(exported.csv);
    expect(generateBankExport({ seed: 2 }).csv).not.toBe(exported.csv);
  });

  it("covers two calendar months of one tenant, in date order, everyday rows plus the monthly fixtures", () => {
    expect(rows).toHaveLength(2 * 1200 + 2 * 11);
    expect(rows[0]!.date >= "2026-01-01").toBe(true);
    expect(rows.at(-1)!.date <= "2026-02-28").toBe(true);
    expect(rows.map((r) => r.date)).toEqual(rows.map((r) => r.date).sort());
    // The salary comes once a month, on the same day, the same amount.
    const salary = rows.filter((r) => r.counterparty === "Muster Consulting GmbH");
    expect(salary.map((r) => [r.date, r.amount])).toEqual([
      ["2026-01-28", "3850.00"],
      ["2026-02-28", "3850.00"],
    ]);
  });

  it("has a few hundred counterparties whose frequencies fall off like Zipf's law", () => {
    expect(exported.counterparties.length).toBeGreaterThanOrEqual(300);
    expect(counts.size).toBeGreaterThan(200);
    const top10 = byFrequency.slice(0, 10).reduce((a, b) => a + b, 0);
    // A head that makes a large share of the rows, and a long tail of counterparties seen once or twice.
    expect(top10 / rows.length).toBeGreaterThan(0.3);
    expect(top10 / rows.length).toBeLessThan(0.6);
    expect(byFrequency[0]! / byFrequency[9]!).toBeGreaterThan(5);
    expect(byFrequency.filter((n) => n <= 2).length).toBeGreaterThan(60);
  });

  it("has varied descriptions with dates and references, so hardly two rows read the same", () => {
    expect(new Set(rows.map((r) => r.description)).size / rows.length).toBeGreaterThan(0.99);
    expect(rows.filter((r) => /\b\d{2}\.\d{2}\b/.test(r.description)).length / rows.length).toBeGreaterThan(0.9);
    expect(rows.some((r) => /EREF\+/.test(r.description) && /MREF\+/.test(r.description))).toBe(true);
    expect(rows.every((r) => r.description.length <= 140)).toBe(true);
    // A debtor's direct debits carry its one mandate, month after month.
    const rent = rows.filter((r) => r.counterparty.startsWith("Hausverwaltung"));
    expect(new Set(rent.map((r) => /MREF\+(\S+)/.exec(r.description)![1])).size).toBe(1);
  });

  it("is a file the importer accepts, every row valid", () => {
    const inspection = inspectUpload(new TextEncoder().encode(exported.csv), {
      maxBytes: 50 * 1024 * 1024,
      maxRows: 100_000,
    });
    expect(inspection).toMatchObject({ ok: true, delimiter: ",", rows: rows.length });
    const invalid = rows.filter((r) => !transactionRowSchema.safeParse(r).success);
    expect(invalid).toEqual([]);
    expect(rows.some((r) => r.amount.startsWith("-"))).toBe(true);
    expect(rows.some((r) => !r.amount.startsWith("-"))).toBe(true);
  });

  it("quotes fields that need it", () => {
    expect(
      bankExportCsv([
        { date: "2026-01-02", amount: "-1.00", currency: "EUR", counterparty: 'A, "B"', description: "x" },
      ]),
    ).toBe('date,amount,currency,counterparty,description\n2026-01-02,-1.00,EUR,"A, ""B""",x\n');
  });

  it("takes its size and period from its options", () => {
    const small = generateBankExport({ start: "2026-03-15", months: 1, rowsPerMonth: 50, counterparties: 40 });
    expect(small.rows).toHaveLength(50 + 11);
    expect(small.rows.every((r) => r.date.startsWith("2026-03"))).toBe(true);
    expect(new Set(small.rows.map((r) => r.counterparty)).size).toBeLessThanOrEqual(40 + 11);
  });
});
