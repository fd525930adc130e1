import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import type { ModelPrices } from "@/lib/modelcalls/usage";
import { estimateCostUsd } from "@/lib/modelcalls/usage";
import { providerOfModel } from "@/lib/model-providers";

/** Rows by where their category came from, and what the reused ones saved. */
export interface AnswerReuse {
  /** Committed rows by source: their own call, an earlier row of the same job, a stored answer. */
  model: number;
  job: number;
  cache: number;
  /** (job + cache) / all rows; null without rows. */
  reuseRate: number | null;
  /**
   * Rows by the model whose answer they got (their own call's, or the one they reused), most rows
   * first, with the provider configured for that model: a fallback's rows are told apart.
   */
  byModel: { model: string; provider: string | null; rows: number }[];
  /** cache / all rows; null without rows. */
  cacheHitRate: number | null;
  saved: {
    /** Calls not made: the reused rows' shares of the calls that first answered them. */
    calls: number;
    promptTokens: number;
    completionTokens: number;
    /** Estimated from `BOUNDED_MODEL_PRICES`; null when none of the saved tokens has a price. */
    costUsd: number | null;
    /** Some saved tokens are of a model without a price (left out of the cost). */
    unpriced: boolean;
  };
}

interface SourceSum {
  key: string;
  source: "model" | "job" | "cache";
  model: string;
  rows: number;
  calls: number;
  prompt: number;
  completion: number;
}

function reuseOf(rows: SourceSum[], prices: ModelPrices): AnswerReuse {
  const count = { model: 0, job: 0, cache: 0 };
  const saved = { calls: 0, promptTokens: 0, completionTokens: 0, costUsd: null as number | null, unpriced: false };
  for (const r of rows) {
    count[r.source] += r.rows;
    if (r.source === "model") continue;
    saved.calls += r.calls;
    saved.promptTokens += r.prompt;
    saved.completionTokens += r.completion;
    const cost = estimateCostUsd(r.model, r.prompt, r.completion, prices);
    if (cost === null) saved.unpriced = true;
    else saved.costUsd = (saved.costUsd ?? 0) + cost;
  }
  const all = count.model + count.job + count.cache;
  const byModel = new Map<string, number>();
  for (const r of rows) byModel.set(r.model, (byModel.get(r.model) ?? 0) + r.rows);
  return {
    ...count,
    byModel: [...byModel]
      .map(([model, n]) => ({ model, provider: providerOfModel(model)?.name ?? null, rows: n }))
      .sort((a, b) => b.rows - a.rows),
    reuseRate: all === 0 ? null : (count.job + count.cache) / all,
    cacheHitRate: all === 0 ? null : count.cache / all,
    saved,
  };
}

const sums = (
  select: string,
) => `SELECT ${select} AS key, u.source::text AS source, u.model, count(*)::int AS rows, sum(u."callShare")::float8 AS calls,
  sum(u."promptTokens")::float8 AS prompt, sum(u."completionTokens")::float8 AS completion`;

/**
 * How a job's committed rows got their categories (a split job's parts included): counted from
 * the rows' records, written with each row's commit, so it holds after any restart.
 */
export async function getJobAnswerReuse(
  jobId: string,
  prices: ModelPrices = env().BOUNDED_MODEL_PRICES,
): Promise<AnswerReuse> {
  const rows = await db().$queryRawUnsafe<SourceSum[]>(
    `${sums("''")}
     FROM "CategoryAnswerUse" u
     WHERE u."jobId" = $1::uuid OR u."jobId" IN (SELECT id FROM "Job" WHERE "parentId" = $1::uuid)
     GROUP BY 2, 3`,
    jobId,
  );
  return reuseOf(rows, prices);
}

/** Answer reuse per job kind for rows committed in [from, to), kinds with the most rows first. */
export async function getAnswerReuseByKind(
  window: { from: Date; to: Date },
  prices: ModelPrices = env().BOUNDED_MODEL_PRICES,
): Promise<(AnswerReuse & { kind: string })[]> {
  const rows = await db().$queryRawUnsafe<SourceSum[]>(
    `${sums('u."jobKind"')}
     FROM "CategoryAnswerUse" u
     WHERE u."createdAt" >= $1 AND u."createdAt" < $2
     GROUP BY 1, 2, 3`,
    window.from,
    window.to,
  );
  const kinds = [...new Set(rows.map((r) => r.key))];
  return kinds
    .map((kind) => ({
      kind,
      ...reuseOf(
        rows.filter((r) => r.key === kind),
        prices,
      ),
    }))
    .sort((a, b) => b.model + b.job + b.cache - (a.model + a.job + a.cache));
}
