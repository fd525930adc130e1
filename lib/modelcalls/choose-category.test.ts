import { describe, expect, it } from "vitest";
import { distinctWord } from "@/lib/format/distinct-word";
import { buildCategoryPrompt, categoryQuestion, chooseCategory, parseCategoryAnswer } from "./choose-category";
import type { ModelFetch } from "./chat-completion";

const slugs = ["groceries", "dining", "transport", "home", "home-office", "salary", "other"];

describe("parseCategoryAnswer", () => {
  it.each([
    ["groceries", "groceries"],
    ["  Groceries.\n", "groceries"],
    ['"transport"', "transport"],
    ["Category: DINING", "dining"],
    ["The category is salary, since it is a monthly payment.", "salary"],
    ["**transport**", "transport"],
    ["home office", "home-office"],
    ["home_office", "home-office"],
    ["home", "home"],
    ["<think>could be groceries or dining</think>\ntransport", "transport"],
  ])("reads %j as %s", (answer, slug) => {
    expect(parseCategoryAnswer(answer, slugs)).toBe(slug);
  });

  it("takes the slug named first when the answer names several", () => {
    expect(parseCategoryAnswer("dining, or maybe groceries", slugs)).toBe("dining");
  });

  it("does not find a slug inside another word", () => {
    expect(parseCategoryAnswer("homeware", slugs)).toBe("other");
  });

  it.each(["", "I cannot tell.", "entertainment"])("falls back to other for %j", (answer) => {
    expect(parseCategoryAnswer(answer, slugs)).toBe("other");
  });
});

describe("buildCategoryPrompt", () => {
  it("lists every allowed slug and asks for exactly one", () => {
    const [system, user] = buildCategoryPrompt(
      {
        date: new Date("2024-03-01T00:00:00Z"),
        amount: "-12.50",
        currency: "EUR",
        counterparty: "REWE",
        description: "Einkauf",
      },
      [
        { slug: "groceries", name: "Groceries" },
        { slug: "other", name: "Other" },
      ],
    );
    expect(system!.role).toBe("system");
    expect(system!.content).toMatch(/exactly one category slug/);
    expect(user!.content).toContain("- groceries: Groceries\n- other: Other");
    expect(user!.content).toContain("Direction: money out");
    expect(user!.content).toContain("Counterparty: rewe");
    expect(user!.content).toContain("Description: einkauf");
  });

  it("shows the transaction as its normalised question only: no date, amount or currency", () => {
    const categories = [{ slug: "other", name: "Other" }];
    const prompt = (t: Parameters<typeof buildCategoryPrompt>[0]) => buildCategoryPrompt(t, categories);
    const a = prompt({
      date: "2024-03-01",
      amount: "-12.50",
      currency: "EUR",
      counterparty: " REWE  Markt ",
      description: "Card\n payment 5",
    });
    const b = prompt({
      date: "2025-07-09",
      amount: -3,
      currency: "USD",
      counterparty: "rewe markt",
      description: "card payment 5",
    });
    expect(a).toEqual(b);
    expect(a[1]!.content).not.toMatch(/2024|12\.50|EUR/);
    expect(a[1]!.content).toContain("Description: card payment 5");
    const income = prompt({
      date: "2024-03-01",
      amount: "12.50",
      currency: "EUR",
      counterparty: "REWE Markt",
      description: "card payment 5",
    });
    expect(income[1]!.content).toContain("Direction: money in");
    const other = prompt({
      date: "2024-03-01",
      amount: "-12.50",
      currency: "EUR",
      counterparty: "REWE Markt",
      description: "card payment 6",
    });
    expect(other).not.toEqual(a);
  });

  it("reads a word with three or more digits as # — dates, times, card, mandate and invoice numbers name one payment, not its kind — and keeps shorter numbers", () => {
    const line = (description: string, counterparty = "REWE Markt") =>
      categoryQuestion({ date: "2026-01-04", amount: "-12.50", currency: "EUR", counterparty, description });
    // The same shop, two days, two terminals, two receipts: one question.
    const january = line("VISA Debit 2026-01-04 14:32 Karte 4871 REWE Markt TE 8812345 Beleg 00123");
    const february = line("VISA Debit 2026-02-11 09:05 Karte 4871 REWE Markt TE 8899001 Beleg 04567");
    expect(january).toEqual(february);
    expect(january.description).toBe("visa debit # karte # rewe markt te # beleg #");
    // The rent with its mandate reference and month: the month is a word and stays.
    expect(line("SEPA-Lastschrift EREF+88123 MREF+M-4471 SVWZ+Miete Januar").description).toBe(
      "sepa-lastschrift # svwz+miete januar",
    );
    // A short number may be what the payment is for.
    expect(line("Zimmer 12").description).toBe("zimmer 12");
    expect(line("Garage 7").description).not.toEqual(line("Garage 8").description);
    expect(line("card payment", "7-Eleven").counterparty).toBe("7-eleven");
    // Test rows that must each ask: a word per row, no digits.
    expect(new Set(Array.from({ length: 2_000 }, (_, i) => line(`row ${distinctWord(i)}`).description)).size).toBe(
      2_000,
    );
  });
});

describe("chooseCategory", () => {
  const answering =
    (content: string): ModelFetch =>
    async () =>
      new Response(JSON.stringify({ choices: [{ message: { role: "assistant", content } }] }), {
        headers: { "content-type": "application/json" },
      });
  const base = {
    transaction: { date: "2024-03-01", amount: -3.2, currency: "EUR", counterparty: "BVG", description: "Ticket" },
    categories: slugs.map((slug) => ({ slug, name: slug })),
    signal: new AbortController().signal,
    context: { queue: "imports", jobKind: "csv_import" },
    baseUrl: "http://model.invalid/v1",
    record: async () => {},
  };

  it("returns the slug the model named, read leniently", async () => {
    await expect(chooseCategory({ ...base, fetch: answering("Transport.") })).resolves.toBe("transport");
  });

  it("returns other when the model names no listed slug", async () => {
    await expect(chooseCategory({ ...base, fetch: answering("public transit") })).resolves.toBe("other");
  });
});
