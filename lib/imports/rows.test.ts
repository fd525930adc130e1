import { describe, expect, it } from "vitest";
import { CURRENCIES, rowProblem, transactionRowSchema } from "./rows";

const GOOD = { date: "2026-01-31", amount: "-12.50", currency: "EUR", counterparty: "Rewe", description: "Groceries" };

/** The one sentence the end user reads for a bad row (fails the test if the row is accepted). */
function problemOf(fields: Record<string, unknown>): string {
  const result = transactionRowSchema.safeParse(fields);
  if (result.success) throw new Error(`row was accepted: ${JSON.stringify(fields)}`);
  return rowProblem(result.error);
}

const amountOf = (amount: string) => transactionRowSchema.parse({ ...GOOD, amount }).amount;

describe("transactionRowSchema: good rows", () => {
  it("turns a row into typed values: amount in minor units, currency upper-cased, text trimmed", () => {
    expect(
      transactionRowSchema.parse({
        date: " 2026-01-31 ",
        amount: " -12.50 ",
        currency: " eur ",
        counterparty: "  Rewe Markt ",
        description: " weekly shop ",
      }),
    ).toEqual({
      date: "2026-01-31",
      amount: -1250n,
      currency: "EUR",
      counterparty: "Rewe Markt",
      description: "weekly shop",
    });
  });

  it("reads amounts with a decimal point or a decimal comma, with or without thousands separators", () => {
    expect(amountOf("1234.56")).toBe(123456n);
    expect(amountOf("1234,56")).toBe(123456n);
    expect(amountOf("1.234,56")).toBe(123456n);
    expect(amountOf("1,234.56")).toBe(123456n);
    expect(amountOf("1 234,56")).toBe(123456n);
    expect(amountOf("1.234.567,89")).toBe(123456789n);
  });

  it("reads whole amounts and a single decimal digit as minor units", () => {
    expect(amountOf("12")).toBe(1200n);
    expect(amountOf("12.5")).toBe(1250n);
    expect(amountOf("0,05")).toBe(5n);
  });

  it("keeps the sign: debits negative, an explicit plus positive", () => {
    expect(amountOf("-0.01")).toBe(-1n);
    expect(amountOf("+3.00")).toBe(300n);
  });

  it("keeps amounts beyond Number precision exact (bigint minor units)", () => {
    expect(amountOf("90071992547409.93")).toBe(9007199254740993n);
  });

  it("accepts every listed currency, in any case", () => {
    for (const currency of CURRENCIES) {
      expect(transactionRowSchema.parse({ ...GOOD, currency: currency.toLowerCase() }).currency).toBe(currency);
    }
  });

  it("accepts a leap day in a leap year", () => {
    expect(transactionRowSchema.parse({ ...GOOD, date: "2028-02-29" }).date).toBe("2028-02-29");
  });

  it("treats a missing or empty description as empty, not as a bad row", () => {
    expect(transactionRowSchema.parse({ ...GOOD, description: undefined }).description).toBe("");
    expect(transactionRowSchema.parse({ ...GOOD, description: "   " }).description).toBe("");
  });
});

describe("transactionRowSchema: bad rows, with the sentence the end user reads", () => {
  it("a date in another format", () => {
    expect(problemOf({ ...GOOD, date: "31.01.2026" })).toBe("date must look like 2026-01-31");
    expect(problemOf({ ...GOOD, date: "2026/01/31" })).toBe("date must look like 2026-01-31");
    expect(problemOf({ ...GOOD, date: "2026-1-31" })).toBe("date must look like 2026-01-31");
  });

  it("a date that does not exist on the calendar", () => {
    expect(problemOf({ ...GOOD, date: "2026-02-30" })).toBe("date is not a real calendar date");
    expect(problemOf({ ...GOOD, date: "2026-02-29" })).toBe("date is not a real calendar date");
    expect(problemOf({ ...GOOD, date: "2026-13-01" })).toBe("date is not a real calendar date");
    expect(problemOf({ ...GOOD, date: "2026-00-10" })).toBe("date is not a real calendar date");
  });

  it("a missing date", () => {
    expect(problemOf({ ...GOOD, date: undefined })).toBe("date is missing");
  });

  it("an amount that is not a number, quoted back (cut to 20 characters)", () => {
    expect(problemOf({ ...GOOD, amount: "twelve" })).toBe("amount “twelve” is not a number");
    expect(problemOf({ ...GOOD, amount: "12.50 EUR" })).toBe("amount “12.50 EUR” is not a number");
    expect(problemOf({ ...GOOD, amount: "" })).toBe("amount “” is not a number");
    expect(problemOf({ ...GOOD, amount: `${"1".repeat(30)}x` })).toBe(`amount “${"1".repeat(20)}” is not a number`);
  });

  it("an amount with more than two decimals after a comma is not silently rounded", () => {
    expect(problemOf({ ...GOOD, amount: "1,2345" })).toBe("amount “1,2345” is not a number");
  });

  it("an amount of zero (nothing to import)", () => {
    expect(problemOf({ ...GOOD, amount: "0.00" })).toBe("amount is zero");
    expect(problemOf({ ...GOOD, amount: "-0" })).toBe("amount is zero");
  });

  it("a missing amount", () => {
    expect(problemOf({ ...GOOD, amount: undefined })).toBe("amount is missing");
  });

  it("a currency that is not accepted, listing the accepted ones", () => {
    expect(problemOf({ ...GOOD, currency: "XYZ" })).toBe(`currency “XYZ” is not one of ${CURRENCIES.join(", ")}`);
    expect(problemOf({ ...GOOD, currency: "€" })).toMatch(/^currency “€” is not one of EUR, USD/);
  });

  it("a missing currency", () => {
    expect(problemOf({ ...GOOD, currency: undefined })).toBe("currency is missing");
  });

  it("an empty or blank counterparty", () => {
    expect(problemOf({ ...GOOD, counterparty: "" })).toBe("counterparty is empty");
    expect(problemOf({ ...GOOD, counterparty: "   " })).toBe("counterparty is empty");
  });

  it("a missing counterparty", () => {
    expect(problemOf({ ...GOOD, counterparty: undefined })).toBe("counterparty is missing");
  });

  it("text longer than the columns hold", () => {
    expect(problemOf({ ...GOOD, counterparty: "x".repeat(201) })).toBe("counterparty is longer than 200 characters");
    expect(problemOf({ ...GOOD, description: "x".repeat(501) })).toBe("description is longer than 500 characters");
  });

  it("reports the first problem of a row with several, as one sentence", () => {
    expect(problemOf({ date: "yesterday", amount: "abc", currency: "XXX", counterparty: "", description: "" })).toBe(
      "date must look like 2026-01-31",
    );
  });
});
