import http from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { buildBatchCategoryPrompt } from "@/lib/modelcalls/categoriser";
import { buildCategoryPrompt, type CategorisableTransaction } from "@/lib/modelcalls/choose-category";
import { batchLatencyFactor, batchRowsOf, createModelSimulator, simulateCategoryAnswer } from "./model";
import { createRouter } from "./router";

const CATEGORIES = [
  { slug: "groceries", name: "Groceries" },
  { slug: "transport", name: "Transport" },
  { slug: "other", name: "Other" },
];
const tx = (counterparty: string, description = "card payment"): CategorisableTransaction => ({
  date: "2026-01-04",
  amount: "-5.50",
  currency: "EUR",
  counterparty,
  description,
});
const batch = (...transactions: CategorisableTransaction[]) =>
  buildBatchCategoryPrompt(
    transactions.map((transaction, i) => ({ id: String(i + 2), transaction })),
    CATEGORIES,
  );

describe("the simulated model's batch answers", () => {
  it("recognises the batch prompt and answers a JSON object mapping every row's id to its slug", () => {
    const messages = batch(tx("REWE Markt"), tx("Deutsche Bahn"), tx("Acme GmbH", "office chair"));
    expect(batchRowsOf(messages)?.map((r) => r.id)).toEqual(["2", "3", "4"]);
    expect(JSON.parse(simulateCategoryAnswer(messages))).toEqual({ 2: "groceries", 3: "transport", 4: "other" });
  });

  it("does not take the single-row prompt for a batch", () => {
    const single = buildCategoryPrompt(tx("REWE Markt"), CATEGORIES);
    expect(batchRowsOf(single)).toBeUndefined();
    expect(simulateCategoryAnswer(single)).toBe("groceries");
  });

  it("leaves out a row marked sim:omit and answers a row marked sim:bad-slug with a slug not in the list", () => {
    const answer = JSON.parse(
      simulateCategoryAnswer(
        batch(tx("REWE Markt"), tx("Deutsche Bahn", "sim:omit"), tx("REWE Markt", "sim:bad-slug")),
      ),
    );
    expect(answer).toEqual({ 2: "groceries", 4: "not-a-listed-category" });
  });

  it("answers a sentence, not JSON, when a row is marked sim:garbage", () => {
    const answer = simulateCategoryAnswer(batch(tx("REWE Markt"), tx("Deutsche Bahn", "sim:garbage")));
    expect(() => JSON.parse(answer)).toThrow();
  });

  it("ignores the markers in a single-row prompt, so rows asked again on their own are answered", () => {
    expect(simulateCategoryAnswer(buildCategoryPrompt(tx("REWE Markt", "sim:garbage sim:omit"), CATEGORIES))).toBe(
      "groceries",
    );
  });

  it("takes 10 % of a single call longer per extra row", () => {
    expect([1, 2, 8, 11].map(batchLatencyFactor)).toEqual([1, 1.1, 1.7000000000000002, 2]);
  });

  it("waits a batch's latency out scaled by its size", async () => {
    // 1 s at time scale 0.1: a single call waits 100 ms, a batch of 11 rows 200 ms.
    const sim = createModelSimulator({ errorRate: 0, timeScale: 0.1, latencyMs: () => 1_000, models: ["sim"] });
    const server = http.createServer(createRouter(sim.routes));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const timed = async (messages: unknown) => {
      const started = performance.now();
      const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "sim", messages }),
      });
      await response.json();
      return performance.now() - started;
    };
    try {
      const single = await timed(buildCategoryPrompt(tx("REWE Markt"), CATEGORIES));
      const eleven = await timed(batch(...Array.from({ length: 11 }, () => tx("REWE Markt"))));
      // Lower bounds only: a busy machine adds time, never takes it away. The batch of 11 waits
      // at least twice a single call's latency, which only the size factor explains.
      expect(single).toBeGreaterThanOrEqual(99);
      expect(eleven).toBeGreaterThanOrEqual(199);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
