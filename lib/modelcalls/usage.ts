import type { z } from "zod";
import { db, Prisma } from "@/lib/db/client";
import { env, type Env } from "@/lib/env";
import { RANGE_MS, latencyHistogramQuerySchema } from "./queries";

/**
 * Tokens of model calls and their estimated cost, for the /model-calls page and the job page.
 * Tokens are what the model endpoint counted (the `usage` of its answer, kept on each ModelCall
 * row); the cost is an estimate from `BOUNDED_MODEL_PRICES`, never a bill. Summed in PostgreSQL
 * per model (prices are per model), so only a few aggregated rows reach JavaScript.
 */

/** USD per million tokens, by model name (`BOUNDED_MODEL_PRICES`). */
export type ModelPrices = Env["BOUNDED_MODEL_PRICES"];

export interface TokenTotals {
  /** Model calls that reported tokens. */
  calls: number;
  promptTokens: number;
  completionTokens: number;
  /** The estimated cost of the priced models' tokens; null when none of the tokens has a price. */
  costUsd: number | null;
  /** Whether some tokens came from a model without a price, so `costUsd` leaves them out. */
  unpriced: boolean;
}

export interface UsageRow extends TokenTotals {
  /** The kind, the tenant's slug or the job's id; "" for calls outside any job. */
  key: string;
}

/**
 * The token usage report of a window (`getTokenUsage`): tokens and cost in all and broken down.
 * One answer's own tokens are `AnswerTokens` (./chat-completion.ts).
 */
export interface TokenUsage {
  total: TokenTotals;
  byKind: UsageRow[];
  byTenant: UsageRow[];
  /** The jobs with the most tokens, most first (at most `TOP_JOBS`). */
  byJob: UsageRow[];
  /** Per lane (`sync`, `batch`), each at its own price: what the batch lane spent and saved. */
  byLane: UsageRow[];
  /** Per model asked: each provider's own (lib/model-providers.ts). */
  byModel: UsageRow[];
}

/** How many jobs the per-job table lists: the heaviest, which are the ones worth a look. */
export const TOP_JOBS = 10;

/** The same range and filters as the latency view, less the call type: tokens are the model calls'. */
export const tokenUsageQuerySchema = latencyHistogramQuerySchema.omit({ type: true });
export type TokenUsageQuery = z.input<typeof tokenUsageQuerySchema>;

/** How a model call was made: answered at once (`sync`), or through the provider's Batch API (`batch`). */
export type PriceLane = "sync" | "batch";

/** USD per million tokens of one lane. */
export interface TokenPrice {
  prompt: number;
  completion: number;
}

/** OpenAI's published Batch API price: half the sync price. What a batch token costs when no batch price is set. */
export const BATCH_PRICE_FACTOR = 0.5;

/**
 * A model's price in a lane (`BOUNDED_MODEL_PRICES`); null when the model has no price. A batch
 * price left out is half the sync one (`BATCH_PRICE_FACTOR`), each of prompt and completion alone.
 */
export function priceOf(
  model: string,
  lane: PriceLane,
  prices: ModelPrices = env().BOUNDED_MODEL_PRICES,
): TokenPrice | null {
  const price = prices[model];
  if (!price) return null;
  if (lane === "sync") return { prompt: price.prompt, completion: price.completion };
  return {
    prompt: price.batchPrompt ?? price.prompt * BATCH_PRICE_FACTOR,
    completion: price.batchCompletion ?? price.completion * BATCH_PRICE_FACTOR,
  };
}

/** A model's cost for the given tokens in a lane, in USD; null when the model has no price. */
export function estimateCostUsd(
  model: string,
  promptTokens: number,
  completionTokens: number,
  prices: ModelPrices,
  lane: PriceLane = "sync",
): number | null {
  const price = priceOf(model, lane, prices);
  if (!price) return null;
  return (promptTokens * price.prompt + completionTokens * price.completion) / 1_000_000;
}

interface ModelSum {
  key: string;
  model: string;
  /** The lane the calls were made in: each is priced at its own price. */
  lane: PriceLane;
  calls: number;
  prompt: number;
  completion: number;
}

/** Sums per-model rows into one total per key, costs estimated per model; order of first appearance kept. */
function totalsByKey(rows: ModelSum[], prices: ModelPrices): UsageRow[] {
  const byKey = new Map<string, UsageRow>();
  for (const row of rows) {
    const total = byKey.get(row.key) ?? {
      key: row.key,
      calls: 0,
      promptTokens: 0,
      completionTokens: 0,
      costUsd: null,
      unpriced: false,
    };
    total.calls += row.calls;
    total.promptTokens += row.prompt;
    total.completionTokens += row.completion;
    const cost = estimateCostUsd(row.model, row.prompt, row.completion, prices, row.lane);
    if (cost === null) total.unpriced ||= row.prompt + row.completion > 0;
    else total.costUsd = (total.costUsd ?? 0) + cost;
    byKey.set(row.key, total);
  }
  return [...byKey.values()];
}

const tokensOf = (r: TokenTotals) => r.promptTokens + r.completionTokens;
const heaviestFirst = (rows: UsageRow[]) =>
  rows.sort((a, b) => tokensOf(b) - tokensOf(a) || a.key.localeCompare(b.key));

/**
 * Model calls with tokens in the window and filters: the rows every breakdown sums. A job's batch
 * at the Batch API is one call of type `batch` (lane `batch`) with its answered rows' tokens.
 */
function scopedCalls(query: z.output<typeof tokenUsageQuerySchema>, now: Date): Prisma.Sql {
  const from = new Date(now.getTime() - RANGE_MS[query.range]);
  const where = [
    Prisma.sql`mc."type" IN ('model', 'batch')`,
    Prisma.sql`mc."startedAt" >= ${from.toISOString()}::timestamp AND mc."startedAt" <= ${now.toISOString()}::timestamp`,
    Prisma.sql`(mc."promptTokens" IS NOT NULL OR mc."completionTokens" IS NOT NULL)`,
  ];
  if (query.queue) where.push(Prisma.sql`mc."queue" = ${query.queue}`);
  if (query.kind) where.push(Prisma.sql`mc."jobKind" = ${query.kind}`);
  if (query.model) where.push(Prisma.sql`mc."model" = ${query.model}`);
  return Prisma.sql`SELECT mc.* FROM "ModelCall" mc WHERE ${Prisma.join(where, " AND ")}`;
}

const sums = Prisma.sql`count(*)::int AS calls, coalesce(sum(c."promptTokens"), 0)::float8 AS prompt, coalesce(sum(c."completionTokens"), 0)::float8 AS completion`;

/** Tokens and estimated cost in the window, in all and per kind, per tenant and for the heaviest jobs. */
export async function getTokenUsage(
  input: TokenUsageQuery = {},
  now: Date = new Date(),
  prices: ModelPrices = env().BOUNDED_MODEL_PRICES,
): Promise<TokenUsage> {
  const calls = scopedCalls(tokenUsageQuerySchema.parse(input), now);
  const [byKind, byTenant, byJob] = await Promise.all([
    db().$queryRaw<ModelSum[]>`
      WITH c AS (${calls})
      SELECT coalesce(c."jobKind", '') AS key, c."model" AS model, c."lane" AS lane, ${sums} FROM c GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
    db().$queryRaw<ModelSum[]>`
      WITH c AS (${calls})
      SELECT coalesce(t."slug", '') AS key, c."model" AS model, c."lane" AS lane, ${sums}
      FROM c LEFT JOIN "Job" j ON j."id" = c."jobId" LEFT JOIN "Tenant" t ON t."id" = j."tenantId"
      GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
    db().$queryRaw<ModelSum[]>`
      WITH c AS (${calls}),
      top AS (
        SELECT c."jobId" FROM c WHERE c."jobId" IS NOT NULL GROUP BY 1
        ORDER BY sum(coalesce(c."promptTokens", 0) + coalesce(c."completionTokens", 0)) DESC, 1 LIMIT ${TOP_JOBS}
      )
      SELECT c."jobId"::text AS key, c."model" AS model, c."lane" AS lane, ${sums} FROM c JOIN top USING ("jobId") GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
  ]);
  const kinds = heaviestFirst(totalsByKey(byKind, prices));
  return {
    total: totalsByKey(
      byKind.map((r) => ({ ...r, key: "" })),
      prices,
    )[0] ?? { calls: 0, promptTokens: 0, completionTokens: 0, costUsd: null, unpriced: false },
    byKind: kinds,
    byTenant: heaviestFirst(totalsByKey(byTenant, prices)),
    byJob: heaviestFirst(totalsByKey(byJob, prices)),
    byLane: heaviestFirst(
      totalsByKey(
        byKind.map((r) => ({ ...r, key: r.lane })),
        prices,
      ),
    ),
    byModel: heaviestFirst(
      totalsByKey(
        byKind.map((r) => ({ ...r, key: r.model })),
        prices,
      ),
    ),
  };
}

/** One job's tokens and estimated cost, every attempt of every call included. */
export async function getJobTokenUsage(
  jobId: string,
  prices: ModelPrices = env().BOUNDED_MODEL_PRICES,
): Promise<TokenTotals> {
  const rows = await db().$queryRaw<ModelSum[]>`
    SELECT '' AS key, c."model" AS model, c."lane" AS lane, ${sums}
    FROM "ModelCall" c
    WHERE c."jobId" = ${jobId}::uuid AND c."type" IN ('model', 'batch') AND (c."promptTokens" IS NOT NULL OR c."completionTokens" IS NOT NULL)
    GROUP BY 2, 3`;
  return (
    totalsByKey(rows, prices)[0] ?? { calls: 0, promptTokens: 0, completionTokens: 0, costUsd: null, unpriced: false }
  );
}
