import { describe, expect, it } from "vitest";
import { buildCategoryPrompt, chooseCategory, parseCategoryAnswer } from "./choose-category";
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
      { date: new Date("2024-03-01T00:00:00Z"), amount: "-12.50", currency: "EUR", counterparty: "REWE", description: "Einkauf" },
      [{ slug: "groceries", name: "Groceries" }, { slug: "other", name: "Other" }],
    );
    expect(system!.role).toBe("system");
    expect(system!.content).toMatch(/exactly one category slug/);
    expect(user!.content).toContain("- groceries: Groceries\n- other: Other");
    expect(user!.content).toContain("Date: 2024-03-01");
    expect(user!.content).toContain("Amount: -12.50 EUR");
    expect(user!.content).toContain("Counterparty: REWE");
  });
});

describe("chooseCategory", () => {
  const answering = (content: string): ModelFetch => async () =>
    new Response(JSON.stringify({ choices: [{ message: { role: "assistant", content } }] }), { headers: { "content-type": "application/json" } });
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
