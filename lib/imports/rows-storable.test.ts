import { describe, expect, it } from "vitest";
import { rowProblem, transactionRowSchema } from "./rows";

const good = {
  date: "2026-03-04",
  amount: "-12.50",
  currency: "EUR",
  counterparty: "REWE Markt",
  description: "card payment",
};
const problemOf = (patch: Partial<typeof good>) => {
  const parsed = transactionRowSchema.safeParse({ ...good, ...patch });
  return parsed.success ? null : rowProblem(parsed.error);
};

describe("transaction rows: only what the database can store", () => {
  it("accepts a good row and the edges of the ranges", () => {
    expect(problemOf({})).toBeNull();
    expect(problemOf({ amount: "92233720368547758.07" })).toBeNull();
    expect(problemOf({ amount: "-92233720368547758.08" })).toBeNull();
    expect(problemOf({ date: "1900-01-01" })).toBeNull();
    expect(problemOf({ date: "2199-12-31" })).toBeNull();
    expect(problemOf({ counterparty: "𝔘𝔫𝔦 😀 e\u0301 مرحبا \u2028" })).toBeNull();
  });

  it("refuses amounts a bigint cannot hold, and numbers that are not amounts", () => {
    expect(problemOf({ amount: "92233720368547758.08" })).toBe("amount is too large to be stored");
    expect(problemOf({ amount: "100000000000000000000000" })).toBe("amount is too large to be stored");
    expect(problemOf({ amount: "1e23" })).toMatch(/is not a number/);
    expect(problemOf({ amount: "NaN" })).toMatch(/is not a number/);
    expect(problemOf({ amount: "-0" })).toBe("amount is zero");
  });

  it("refuses dates outside the range, whatever PostgreSQL would make of them", () => {
    expect(problemOf({ date: "0000-01-01" })).toBe("date 0000-01-01 is outside 1900-01-01 … 2199-12-31");
    expect(problemOf({ date: "9999-12-31" })).toMatch(/is outside/);
    expect(problemOf({ date: "275760-09-13" })).toMatch(/must look like/);
  });

  it("refuses NUL characters and lone surrogates in texts", () => {
    expect(problemOf({ counterparty: "a\u0000b" })).toBe("counterparty contains a NUL character");
    expect(problemOf({ description: "lone \ud800 surrogate" })).toBe(
      "description contains invalid Unicode (a lone surrogate)",
    );
    expect(problemOf({ description: "lone \udc00" })).toBe("description contains invalid Unicode (a lone surrogate)");
  });
});
