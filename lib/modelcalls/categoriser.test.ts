import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  batchFixedTokens,
  batchPromptTokens,
  batchRowTokens,
  buildBatchCategoryPrompt,
  createCategoriser,
  parseBatchCategoryAnswer,
} from "./categoriser";
import { countPromptTokens } from "./tokens";

const slugs = ["groceries", "transport", "home", "home-office", "other"];
const ids = ["2", "3", "4"];

describe("parseBatchCategoryAnswer", () => {
  it.each([
    ['{"2": "groceries", "3": "transport", "4": "other"}', "plain JSON"],
    ['```json\n{"2": "groceries", "3": "transport", "4": "other"}\n```', "a code fence"],
    [
      'Here you go:\n```\n{"2": "groceries", "3": "transport", "4": "other"}\n```\nAnything else?',
      "a fence between sentences",
    ],
    [
      'Sure! {"2": "Groceries", "3": "TRANSPORT", "4": " other "} Hope that helps.',
      "sentences around the object, slugs in other cases",
    ],
    [
      '<think>{"2": "home"} no wait</think>{"2": "groceries", "3": "transport", "4": "other"}',
      "a think block with an object of its own",
    ],
  ])("reads every row out of %j (%s)", (answer) => {
    expect(Object.fromEntries(parseBatchCategoryAnswer(answer, ids, slugs))).toEqual({
      2: "groceries",
      3: "transport",
      4: "other",
    });
  });

  it("reads a slug written with other separators as that slug, and never as a shorter one", () => {
    expect(parseBatchCategoryAnswer('{"2": "home office", "3": "home_office", "4": "home"}', ids, slugs)).toEqual(
      new Map([
        ["2", "home-office"],
        ["3", "home-office"],
        ["4", "home"],
      ]),
    );
  });

  it("leaves out rows it does not answer, ids not asked, values that are not exactly one listed slug", () => {
    const answer = '{"2": "groceries", "99": "transport", "3": "dining", "4": "groceries or transport", "5": "other"}';
    expect(parseBatchCategoryAnswer(answer, ids, slugs)).toEqual(new Map([["2", "groceries"]]));
    expect(parseBatchCategoryAnswer('{"2": 7, "3": null, "4": ["other"]}', ids, slugs)).toEqual(new Map());
  });

  it.each([
    "",
    "groceries",
    "I think these are groceries.",
    '["groceries", "transport", "other"]',
    '{"2": "groceries",',
    "{not json}",
  ])("answers no row for %j", (answer) => {
    expect(parseBatchCategoryAnswer(answer, ids, slugs)).toEqual(new Map());
  });
});

describe("buildBatchCategoryPrompt", () => {
  it("writes each row as one line of JSON with its id, so a description with quotes stays in its row", () => {
    const rows = [
      {
        id: "2",
        transaction: {
          date: new Date("2026-01-04T00:00:00Z"),
          amount: "-5.50",
          currency: "EUR",
          counterparty: "REWE",
          description: 'two\nlines "quoted"',
        },
      },
      {
        id: "3",
        transaction: { date: "2026-01-05", amount: -7, currency: "EUR", counterparty: "Acme", description: "x" },
      },
    ];
    const [system, user] = buildBatchCategoryPrompt(rows, [
      { slug: "groceries", name: "Groceries" },
      { slug: "other", name: "Other" },
    ]);
    expect(system!.content).toMatch(/JSON object/);
    const lines = user!.content.split("\n");
    expect(lines).toContain("- groceries: Groceries");
    const heading = lines.indexOf("Transactions (one JSON object per line):");
    // The row's question, normalised (whitespace runs as one space, lower case); no date, amount or currency.
    expect(JSON.parse(lines[heading + 1]!)).toEqual({
      id: "2",
      direction: "money out",
      counterparty: "rewe",
      description: 'two lines "quoted"',
    });
    expect(JSON.parse(lines[heading + 2]!)).toMatchObject({ id: "3", direction: "money out", counterparty: "acme" });
    expect(lines[heading + 3]).toBe("");
    expect(lines.at(-1)).toContain('{"2": "<slug>", "3": "<slug>"}');
  });
});

describe("batchPromptTokens", () => {
  it("counts a batch prompt from its parts within two tokens of counting the whole prompt", () => {
    const categories = [
      { slug: "groceries", name: "Groceries" },
      { slug: "transport", name: "Transport & travel" },
      { slug: "other", name: "Other" },
    ];
    const text = fc.string({ unit: fc.constantFrom("a", "Z", "7", " ", "\n", '"', "é", "€", "-", "."), maxLength: 40 });
    const transaction = fc.record({
      amount: fc.constantFrom("-12.50", "3", "0"),
      counterparty: text,
      description: text,
    });
    fc.assert(
      fc.property(fc.array(transaction, { minLength: 2, maxLength: 12 }), (transactions) => {
        const rows = transactions.map((t, i) => ({
          id: String(100 + i),
          transaction: { date: "2026-01-04", currency: "EUR", ...t },
        }));
        const whole = countPromptTokens(buildBatchCategoryPrompt(rows, categories));
        const parts = batchPromptTokens(
          batchFixedTokens(categories),
          rows.map((r) => ({ id: r.id, tokens: batchRowTokens(r.id, r.transaction) })),
        );
        expect(Math.abs(parts - whole)).toBeLessThanOrEqual(2);
      }),
      { numRuns: 200 },
    );
  });
});

describe("createCategoriser", () => {
  it.each([0, -1, 2.5, Number.NaN])("refuses a batch size of %d", (batchSize) => {
    expect(() =>
      createCategoriser({ categories: [], batchSize, context: {}, signal: new AbortController().signal }),
    ).toThrow(RangeError);
  });

  it("asks first the model of the first provider on its route, so answers are stored and found under the model that gives them", () => {
    const provider = (name: string, model: string) => ({
      name,
      service: `model:${name}` as const,
      baseUrl: "https://x.example/v1",
      apiKey: undefined,
      model,
      concurrency: 1,
      rps: 1,
      tpm: undefined,
    });
    const make = (options: Partial<Parameters<typeof createCategoriser>[0]>) => {
      const c = createCategoriser({
        categories: [],
        batchSize: 8,
        context: {},
        signal: new AbortController().signal,
        ...options,
      });
      c.close();
      return c.model;
    };
    expect(make({ route: [provider("backup", "backup-1"), provider("primary", "primary-1")] })).toBe("backup-1");
    expect(make({ model: "asked-1", route: [provider("backup", "backup-1")] })).toBe("asked-1");
    // No route of its own: its kind's, here the primary alone.
    expect(make({})).toBe("bounded-sim-1");
  });
});
