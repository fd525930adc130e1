import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { nodeFetch } from "@/lib/http/node-fetch";
import { processMetrics } from "@/lib/metrics/metrics";
import { createCategoriser } from "@/lib/modelcalls/categoriser";
import type { ModelFetch } from "@/lib/modelcalls/chat-completion";
import {
  CATEGORY_PROMPT_VERSION,
  type CategorisableTransaction,
  type CategoryChoice,
} from "@/lib/modelcalls/choose-category";
import { flushModelCallRecords } from "@/lib/modelcalls/record";
import type { ChatMessage } from "@/lib/modelcalls/schemas";
import { closeRedis } from "@/lib/redis/client";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { batchRowsOf } from "@/workers/simulators/model";
import { startSimulators, type RunningSimulators } from "@/workers/simulators/server";
import { createJobAnswers } from "./job";
import { categoryAnswerKey } from "./key";
import {
  answerFromCache,
  answersFromCache,
  PRUNE_CHUNK,
  pruneExpiredAnswers,
  rememberAnswer,
  rememberAnswers,
} from "./store";

/**
 * The answers of one job and of a tenant, against the model simulator and the real database:
 * which questions reach the model, and which are answered from the job or the stored answers.
 */

/** Every ModelCall row this file writes carries this queue name, and only these are removed. */
const queue = `answers-test-${randomUUID()}`;
const MODELS = ["bounded-sim-1", "bounded-sim-2"];
const CATEGORIES: CategoryChoice[] = [
  { slug: "groceries", name: "Groceries" },
  { slug: "transport", name: "Transport" },
  { slug: "other", name: "Other" },
];

const tx = (counterparty: string, description: string, amount = "-5.50"): CategorisableTransaction => ({
  date: "2026-01-04",
  amount,
  currency: "EUR",
  counterparty,
  description,
});

let sim: RunningSimulators;
/** Rows asked of the model in all: a batch request's rows, 1 for a single-row request. */
let asked = 0;
const fetch: ModelFetch = (url, init) => {
  const { messages } = JSON.parse(init!.body as string) as { messages: ChatMessage[] };
  asked += batchRowsOf(messages)?.length ?? 1;
  return nodeFetch(url, init);
};
const tenants: string[] = [];

async function tenant(label: string): Promise<string> {
  const slug = uniqueTenantSlug(label);
  tenants.push(slug);
  return ensureTenant(slug);
}

/** One job's answers, as csv_import makes them: a categoriser (batches of 8) behind the cache. */
function job(tenantId: string, options: { model?: string; categories?: CategoryChoice[] } = {}) {
  const categories = options.categories ?? CATEGORIES;
  const categoriser = createCategoriser({
    categories,
    batchSize: 8,
    context: { queue, jobKind: "csv_import" },
    signal: new AbortController().signal,
    baseUrl: sim.modelBaseUrl,
    maxRetries: 0,
    fetch,
    ...(options.model ? { model: options.model } : {}),
  });
  const answers = createJobAnswers({ tenantId, jobKind: "csv_import", categories, categoriser });
  return { answers, close: () => categoriser.close() };
}

/** Asks every row at once (as rows in flight do) and returns the answers in order. */
async function answerAll(tenantId: string, rows: CategorisableTransaction[], options?: Parameters<typeof job>[1]) {
  const j = job(tenantId, options);
  try {
    return await Promise.all(rows.map((row, i) => j.answers.answer(row, i + 2)));
  } finally {
    j.close();
  }
}

const storedFor = (tenantId: string) => db().categoryAnswer.findMany({ where: { tenantId }, orderBy: { id: "asc" } });

beforeAll(async () => {
  sim = await startSimulators({
    port: 0,
    model: { errorRate: 0, timeScale: 0.001, latencyMs: () => 2_000, models: MODELS },
  });
});

afterEach(async () => {
  asked = 0;
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});

afterAll(async () => {
  await sim.close();
  await flushModelCallRecords();
  await db().modelCall.deleteMany({ where: { queue } });
  await closeDb();
  await closeRedis();
});

describe("categoryAnswerKey", () => {
  const base = { transaction: tx("REWE Markt", "card payment 5"), categories: CATEGORIES, model: "m" };
  const key = categoryAnswerKey(base);

  it("is the same for rows whose prompt is the same: case, spacing, date, amount and currency do not show", () => {
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(
      categoryAnswerKey({
        ...base,
        transaction: {
          date: "2025-12-31",
          amount: -99,
          currency: "USD",
          counterparty: "  rewe\tMARKT ",
          description: "Card  payment 5",
        },
      }),
    ).toBe(key);
  });

  it("differs with anything the prompt shows or whoever answers it", () => {
    const others = [
      { ...base, transaction: tx("REWE Markt", "card payment 6") },
      { ...base, transaction: tx("REWE", "card payment 5") },
      { ...base, transaction: tx("REWE Markt", "card payment 5", "5.50") },
      { ...base, model: "m2" },
      { ...base, promptVersion: CATEGORY_PROMPT_VERSION + 1 },
      { ...base, categories: CATEGORIES.slice(1) },
      { ...base, categories: CATEGORIES.map((c) => (c.slug === "other" ? { ...c, name: "Anything else" } : c)) },
      { ...base, categories: [...CATEGORIES].reverse() },
    ].map(categoryAnswerKey);
    expect(new Set([key, ...others]).size).toBe(others.length + 1);
  });
});

describe("createJobAnswers against the model simulator", () => {
  it("asks identical rows of a job once: the rows in flight with the same question wait for the first one's answer", async () => {
    const tenantId = await tenant("same-rows");
    const rows = [
      ...Array.from({ length: 6 }, () => tx("REWE Markt", "card payment")),
      tx(" rewe  markt", "CARD PAYMENT"),
    ];

    const answers = await answerAll(tenantId, rows);

    expect(asked).toBe(1);
    expect(answers.map((a) => a.slug)).toEqual(Array(7).fill("groceries"));
    expect(answers.map((a) => a.source)).toEqual(["model", ...Array(6).fill("job")]);
    // Each reused row saved what the first row's answer cost.
    expect(answers[1]).toMatchObject({ callShare: 1, promptTokens: answers[0]!.promptTokens });
    expect(answers[0]!.promptTokens).toBeGreaterThan(0);
    expect(await storedFor(tenantId)).toHaveLength(1);
  });

  it("answers a later job of the tenant from its stored answers, and no other tenant's", async () => {
    const tenantId = await tenant("second-file");
    const stranger = await tenant("stranger");
    const rows = [tx("REWE Markt", "card payment"), tx("Deutsche Bahn", "ticket"), tx("Acme GmbH", "invoice")];
    await answerAll(tenantId, rows);
    expect(asked).toBe(3);

    const again = await answerAll(tenantId, [...rows, tx("Netflix", "subscription")]);
    // Only the new question is asked.
    expect(asked).toBe(4);
    expect(again.map((a) => a.source)).toEqual(["cache", "cache", "cache", "model"]);
    expect(again.map((a) => a.slug)).toEqual(["groceries", "transport", "other", "other"]);
    expect((await storedFor(tenantId)).map((s) => s.hits)).toEqual([1, 1, 1, 0]);

    const theirs = await answerAll(stranger, rows);
    expect(asked).toBe(7);
    expect(theirs.map((a) => a.source)).toEqual(["model", "model", "model"]);
  });

  it("misses for another model, another category list, another prompt version, and an expired answer", async () => {
    const tenantId = await tenant("misses");
    const row = [tx("REWE Markt", "card payment")];
    await answerAll(tenantId, row);
    expect((await answerAll(tenantId, row))[0]!.source).toBe("cache");
    expect(asked).toBe(1);

    expect((await answerAll(tenantId, row, { model: "bounded-sim-2" }))[0]!.source).toBe("model");
    expect((await answerAll(tenantId, row, { categories: CATEGORIES.slice(0, 2) }))[0]!.source).toBe("model");
    expect(asked).toBe(3);

    // An answer stored for another prompt version is not read for this one.
    const key = categoryAnswerKey({ transaction: row[0]!, categories: CATEGORIES, model: "bounded-sim-1" });
    const older = categoryAnswerKey({
      transaction: row[0]!,
      categories: CATEGORIES,
      model: "bounded-sim-1",
      promptVersion: CATEGORY_PROMPT_VERSION - 1,
    });
    expect(await answerFromCache(tenantId, older)).toBeNull();
    expect(await answerFromCache(tenantId, key)).toMatchObject({ slug: "groceries" });

    // Expired: a miss, asked again, and the new answer replaces the old entry.
    await db().categoryAnswer.updateMany({
      where: { tenantId, key },
      data: { expiresAt: new Date(Date.now() - 1_000) },
    });
    expect(await answerFromCache(tenantId, key)).toBeNull();
    expect((await answerAll(tenantId, row))[0]!.source).toBe("model");
    expect(asked).toBe(4);
    const entry = await db().categoryAnswer.findUniqueOrThrow({ where: { tenantId_key: { tenantId, key } } });
    expect(entry.expiresAt.getTime()).toBeGreaterThan(Date.now() + 89 * 86_400_000);
    expect((await answerAll(tenantId, row))[0]!.source).toBe("cache");
    expect(asked).toBe(4);
  });

  it("a failed question is not shared with the next row that asks it", async () => {
    const tenantId = await tenant("failed");
    const categoriser = {
      model: "bounded-sim-1",
      attempts: 0,
      answer() {
        this.attempts += 1;
        return this.attempts === 1
          ? Promise.reject(new Error("the model service did not answer"))
          : Promise.resolve({
              slug: "groceries",
              model: "bounded-sim-1",
              promptTokens: 10,
              completionTokens: 2,
              callShare: 1,
            });
      },
    };
    const answers = createJobAnswers({ tenantId, jobKind: "csv_import", categories: CATEGORIES, categoriser });
    await expect(answers.answer(tx("REWE Markt", "x"), 2)).rejects.toThrow("did not answer");
    await expect(answers.answer(tx("REWE Markt", "x"), 3)).resolves.toMatchObject({ source: "model" });
    expect(categoriser.attempts).toBe(2);
  });

  it("counts answers by source, and the tokens and cost reuse saved", async () => {
    const read = async () => {
      const registry = processMetrics().registry;
      const value = async (name: string, labels: Record<string, string>) => {
        const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
        const found = (metric?.values ?? []).find((v) =>
          Object.entries(labels).every(([k, l]) => (v.labels as Record<string, string>)[k] === l),
        );
        return found?.value ?? 0;
      };
      return {
        job: await value("bounded_category_answers_total", { kind: "csv_import", source: "job" }),
        model: await value("bounded_category_answers_total", { kind: "csv_import", source: "model" }),
        saved: await value("bounded_model_tokens_saved_total", { kind: "csv_import", type: "prompt" }),
        usd: await value("bounded_model_cost_avoided_usd_total", { kind: "csv_import" }),
      };
    };
    const before = await read();
    const tenantId = await tenant("metrics");
    await answerAll(tenantId, [tx("REWE Markt", "card payment"), tx("REWE Markt", "card payment")]);
    const after = await read();
    expect(after.model - before.model).toBe(1);
    expect(after.job - before.job).toBe(1);
    expect(after.saved - before.saved).toBeGreaterThan(0);
    expect(after.usd - before.usd).toBeGreaterThan(0);
  });
});

describe("rememberAnswer", () => {
  it("keeps the newer of two answers to one question, whichever is written last", async () => {
    const tenantId = await tenant("newer");
    const base = {
      tenantId,
      key: "k".repeat(64),
      model: "bounded-sim-1",
      promptVersion: CATEGORY_PROMPT_VERSION,
      promptTokens: 10,
      completionTokens: 2,
      callShare: 1,
    };
    await rememberAnswer({ ...base, slug: "transport", answeredAt: new Date(Date.now() - 1_000) });
    await rememberAnswer({ ...base, slug: "groceries", answeredAt: new Date(Date.now() - 5_000) });
    expect(await answerFromCache(tenantId, base.key)).toMatchObject({ slug: "transport" });
    await rememberAnswer({ ...base, slug: "other" });
    expect(await answerFromCache(tenantId, base.key)).toMatchObject({ slug: "other" });
  });
});

describe("answers read and written many at once", () => {
  it("one statement stores many (the later of two for one question), and one reads them back, counting a hit each", async () => {
    const [a, b] = [await tenant("many-a"), await tenant("many-b")];
    const base = {
      model: "bounded-sim-1",
      promptVersion: CATEGORY_PROMPT_VERSION,
      promptTokens: 10,
      completionTokens: 2,
      callShare: 0.25,
    };
    const stored = { ...base, ttlDays: 30 };
    const [k1, k2, k3] = ["1", "2", "3"].map((c) => c.repeat(64)) as [string, string, string];
    const answeredAt = new Date(Date.now() - 3_600_123);
    await rememberAnswers([
      { ...stored, tenantId: a, key: k1, slug: "transport", answeredAt },
      { ...stored, tenantId: a, key: k1, slug: "groceries", answeredAt: new Date(answeredAt.getTime() - 60_000) },
      { ...stored, tenantId: a, key: k2, slug: "other", answeredAt, ttlDays: 1 },
      { ...stored, tenantId: b, key: k1, slug: "groceries", answeredAt },
    ]);
    const found = await answersFromCache(a, [k1, k2, k3, k1]);
    expect([...found.keys()].sort()).toEqual([k1, k2]);
    expect(found.get(k1)).toEqual({
      slug: "transport",
      model: base.model,
      promptTokens: base.promptTokens,
      completionTokens: base.completionTokens,
      callShare: base.callShare,
    });
    expect(found.get(k2)).toMatchObject({ slug: "other" });
    expect((await answersFromCache(b, [k1])).get(k1)).toMatchObject({ slug: "groceries" });
    // The moments are stored as given (UTC), and each read counted once per key.
    const rows = await db().categoryAnswer.findMany({
      where: { tenantId: a },
      orderBy: { key: "asc" },
      select: { createdAt: true, expiresAt: true, hits: true },
    });
    expect(rows).toEqual([
      { createdAt: answeredAt, expiresAt: new Date(answeredAt.getTime() + 30 * 86_400_000), hits: 1 },
      { createdAt: answeredAt, expiresAt: new Date(answeredAt.getTime() + 86_400_000), hits: 1 },
    ]);
  });
});

describe("pruneExpiredAnswers", () => {
  it("deletes expired answers of every tenant, in chunks, and keeps the live ones", async () => {
    const [a, b] = [await tenant("prune-a"), await tenant("prune-b")];
    const base = {
      model: "bounded-sim-1",
      promptVersion: CATEGORY_PROMPT_VERSION,
      promptTokens: 10,
      completionTokens: 2,
      callShare: 1,
    };
    const old = new Date(Date.now() - 3 * 86_400_000);
    // More expired rows than one statement deletes, so the pass has to go round again.
    await db().categoryAnswer.createMany({
      data: Array.from({ length: PRUNE_CHUNK + 3 }, (_, i) => ({
        ...base,
        tenantId: i % 2 ? a : b,
        key: i.toString(16).padStart(64, "0"),
        slug: "groceries",
        createdAt: old,
        expiresAt: new Date(old.getTime() + 86_400_000),
      })),
    });
    await rememberAnswer({ ...base, tenantId: a, key: "f".repeat(64), slug: "transport" });
    expect(await pruneExpiredAnswers()).toBeGreaterThanOrEqual(PRUNE_CHUNK + 3);
    expect(await db().categoryAnswer.count({ where: { tenantId: { in: [a, b] } } })).toBe(1);
    expect(await answerFromCache(a, "f".repeat(64))).toMatchObject({ slug: "transport" });
  });
});
