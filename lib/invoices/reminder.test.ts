import { describe, expect, it } from "vitest";
import { ItemError } from "@/lib/core/signals";
import { formatAmount, formatReminder } from "./reminder";

const invoice = {
  number: "INV-00042",
  amountMinor: 123_456n,
  currency: "EUR",
  dueDate: new Date("2026-01-31T00:00:00Z"),
};

describe("formatReminder", () => {
  it("names the invoice, the amount, the due date and the days overdue", () => {
    expect(formatReminder(invoice, "2026-02-12")).toBe(
      "Invoice INV-00042 for 1,234.56 EUR was due on 31 January 2026 and is 12 days overdue. " +
        "Please pay it as soon as possible; if you have paid it already, please ignore this reminder.",
    );
    expect(formatReminder({ ...invoice, currency: "JPY", amountMinor: 5_000n }, "2026-02-01")).toContain(
      "for 5,000 JPY was due on 31 January 2026 and is 1 day overdue",
    );
  });

  it("keeps amounts exact beyond what a float holds", () => {
    expect(formatAmount(900_719_925_474_099_312n, "EUR")).toBe("9,007,199,254,740,993.12 EUR");
    expect(formatAmount(5n, "USD")).toBe("0.05 USD");
  });

  it("refuses a poisoned row with an ItemError a person can read: unknown currency, amount not positive, not yet due", () => {
    const refuse = (patch: Partial<typeof invoice>, asOf = "2026-02-12") => {
      try {
        formatReminder({ ...invoice, ...patch }, asOf);
      } catch (err) {
        expect(err).toBeInstanceOf(ItemError);
        return (err as Error).message;
      }
      throw new Error("not refused");
    };
    expect(refuse({ currency: "XYZ" })).toBe(
      "invoice INV-00042: currency “XYZ” is not one invoices are issued in (EUR, USD, GBP, CHF, SEK, NOK, DKK, PLN, CZK, JPY, CAD, AUD)",
    );
    expect(refuse({ amountMinor: -1_250n })).toBe(
      "invoice INV-00042: the amount is -12.50 EUR; only a positive amount can be overdue (is it a credit note?)",
    );
    expect(refuse({ amountMinor: 0n })).toContain("the amount is 0.00 EUR");
    expect(refuse({}, "2026-01-31")).toBe("invoice INV-00042: it is not past its due date (31 January 2026)");
  });
});
