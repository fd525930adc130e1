import { describe, expect, it } from "vitest";
import { buildCategoryPrompt } from "@/lib/modelcalls/choose-category";
import { MODEL_LATENCY, sampleModelLatencyMs, simulateCategoryAnswer } from "./model";

/** A small seeded generator (mulberry32), so the distribution checks are reproducible. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("sampleModelLatencyMs", () => {
  const random = seeded(20240611);
  const samples = Float64Array.from({ length: 200_000 }, () => sampleModelLatencyMs(random)).sort();
  const quantile = (q: number) => samples[Math.floor(q * samples.length)]!;

  it("has the production median of 5.5 s (±5 %)", () => {
    expect(quantile(0.5)).toBeGreaterThan(5_500 * 0.95);
    expect(quantile(0.5)).toBeLessThan(5_500 * 1.05);
  });

  it("has the production p99 of 35 s (±15 %)", () => {
    expect(quantile(0.99)).toBeGreaterThan(35_000 * 0.85);
    expect(quantile(0.99)).toBeLessThan(35_000 * 1.15);
  });

  it("has a rare tail of minutes-long calls, capped at 11 min", () => {
    expect(samples.filter((ms) => ms > 120_000).length).toBeGreaterThan(0);
    expect(samples.at(-1)!).toBeLessThanOrEqual(MODEL_LATENCY.maxMs);
    expect(samples[0]!).toBeGreaterThan(0);
  });

  it.each([0, 0.5, 1 - 2 ** -53])("stays finite and within bounds when the random source returns %d", (r) => {
    const ms = sampleModelLatencyMs(() => r);
    expect(ms).toBeGreaterThan(0);
    expect(ms).toBeLessThanOrEqual(MODEL_LATENCY.maxMs);
  });
});

describe("simulateCategoryAnswer", () => {
  const categories = ["groceries", "dining", "transport", "salary", "transfers", "other"].map((slug) => ({
    slug,
    name: slug === "dining" ? "Restaurants & cafés" : slug[0]!.toUpperCase() + slug.slice(1),
  }));
  const answer = (counterparty: string, description = "card payment") =>
    simulateCategoryAnswer(
      buildCategoryPrompt(
        { date: "2024-03-01", amount: "-12.50", currency: "EUR", counterparty, description },
        categories,
      ),
    );

  it("answers from the transaction's words", () => {
    expect(answer("REWE Markt GmbH")).toBe("groceries");
    expect(answer("Uber BV", "trip 12 March")).toBe("transport");
    expect(answer("DB Bahn", "ICE Berlin-Hamburg")).toBe("transport");
    expect(answer("ACME Corp", "Salary March")).toBe("salary");
    expect(answer("Café Einstein")).toBe("dining");
    expect(answer("Max Mustermann", "Überweisung Miete")).toBe("transfers");
  });

  it("answers other when nothing matches, not a word from the category list", () => {
    // "Groceries" and "Transport" are in the list of the prompt, but not in the transaction.
    expect(answer("Unknown Ltd", "ref 42")).toBe("other");
  });

  it("only answers slugs the prompt allows", () => {
    const messages = buildCategoryPrompt(
      { date: "2024-03-01", amount: "-8.00", currency: "EUR", counterparty: "Uber", description: "ride" },
      [
        { slug: "travel", name: "Travel" },
        { slug: "other", name: "Other" },
      ],
    );
    expect(simulateCategoryAnswer(messages)).toBe("travel");
  });
});
