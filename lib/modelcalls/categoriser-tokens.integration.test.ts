import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { closeDb } from "@/lib/db/client";
import { knownTokenLimit } from "@/lib/ratelimit/provider";
import { createProviderTokens, providerTokensKey } from "@/lib/ratelimit/provider-tokens";
import { closeRedis, redis } from "@/lib/redis/client";
import { waitFor } from "@/test/helpers/wait";
import { startSimulators, type RunningSimulators } from "@/workers/simulators/server";
import { buildBatchCategoryPrompt, createCategoriser } from "./categoriser";
import type { CategorisableTransaction } from "./choose-category";
import type { ModelCallRecord } from "./record";
import { countPromptTokens } from "./tokens";

const CATEGORIES = [
  { slug: "groceries", name: "Groceries" },
  { slug: "other", name: "Other" },
];
/** A row with a long remittance text: ≈ 60 tokens on its line of the batch prompt. */
const longRow = (row: number): CategorisableTransaction => ({
  date: "2026-01-04",
  amount: `-${row}.50`,
  currency: "EUR",
  counterparty: "Hausverwaltung Schmidt & Partner Immobilien KG",
  description: `SEPA-Lastschrift Miete Nebenkosten Abschlag Zeitraum Januar Mandatsreferenz M-${row} Gläubiger-ID DE98ZZZ09999999999`,
});
const fixedTokens = countPromptTokens(buildBatchCategoryPrompt([], CATEGORIES));
const rowTokens =
  countPromptTokens(buildBatchCategoryPrompt([{ id: "1", transaction: longRow(1) }], CATEGORIES)) - fixedTokens;

let sim: RunningSimulators;
beforeEach(async () => {
  await redis().del(providerTokensKey("model"));
});
afterAll(async () => {
  await sim?.close();
  await redis().del(providerTokensKey("model"));
  await closeRedis();
  await closeDb();
});

/** Eight rows asked at once, as a job's rows in flight ask; the batch sizes of the calls made. */
async function batchesOf(options: { maxBatchTokens?: number }): Promise<number[]> {
  const records: ModelCallRecord[] = [];
  const categoriser = createCategoriser({
    categories: CATEGORIES,
    batchSize: 8,
    signal: new AbortController().signal,
    context: { jobKind: "csv_import" },
    baseUrl: sim.modelBaseUrl,
    record: async (r) => void records.push(r),
    ...options,
  });
  await Promise.all(Array.from({ length: 8 }, (_, i) => categoriser.categorise(longRow(i + 2), i + 2)));
  categoriser.close();
  return records
    .filter((r) => r.outcome === "ok")
    .map((r) => r.batchSize ?? 1)
    .sort();
}

describe("the categoriser's batches and the token budget", () => {
  it("without a token limit, the rows asking together go in one batch of the catalog's size", async () => {
    sim = await startSimulators({ port: 0, model: { errorRate: 0, timeScale: 0.001, latencyMs: () => 1_000 } });
    expect(await batchesOf({ maxBatchTokens: Infinity })).toEqual([8]);
  });

  it("a row that would take a batch past its token budget goes into the next batch", async () => {
    expect(await batchesOf({ maxBatchTokens: fixedTokens + 3 * rowTokens + 5 })).toEqual([2, 3, 3]);
  });

  it("by default a batch takes at most a quarter of the model's tokens per minute, once that limit is known", async () => {
    const tpm = 4 * (fixedTokens + 2 * rowTokens + 5);
    await createProviderTokens().learn(
      "model",
      { tokens: { tokens: { limit: tpm, remaining: tpm, resetMs: 0 } } },
      true,
    );
    await waitFor(() => knownTokenLimit("model") === tpm, {
      timeoutMs: 15_000,
      what: "this process to read the learnt limit",
      intervalMs: 50,
    });
    await sim.close();
    // The simulator announces the same limit, so its answers keep it.
    sim = await startSimulators({
      port: 0,
      model: { errorRate: 0, timeScale: 0.001, latencyMs: () => 1_000, limits: { tpm } },
    });
    expect(await batchesOf({})).toEqual([2, 2, 2, 2]);
  });
});
