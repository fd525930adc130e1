import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import type { Categoriser } from "@/lib/modelcalls/categoriser";
import {
  CATEGORY_PROMPT_VERSION,
  type CategorisableTransaction,
  type CategoryChoice,
} from "@/lib/modelcalls/choose-category";
import { estimateCostUsd } from "@/lib/modelcalls/usage";
import { coalesce } from "@/lib/core/coalesce";
import { categoryAnswerKey } from "./key";
import { answersFromCache, rememberAnswers, type StoredAnswer } from "./store";

const log = logger("answers");

/**
 * The most questions a job remembers the answers of (its in-flight map): past it the oldest are
 * forgotten — a later row with one of them reads the stored answer instead (coalesced with the
 * rows around it). Eight times the rows an import has in flight, so rows in flight together still
 * share one question; bounds a job's memory (about 400 bytes an entry, 1.6 MB in all) whatever the
 * size of its file.
 */
const MAX_JOB_ANSWERS = 4_096;

/** Where a row's category came from (the `AnswerSource` of the schema). */
export type AnswerSource = "model" | "job" | "cache";

/** A row's category, where it came from, and the row's share of the call that first answered it. */
export interface AnsweredRow extends StoredAnswer {
  source: AnswerSource;
}

export interface JobAnswers {
  /**
   * The row's category, asked at most once per question: from an earlier row of the job with the
   * same key (`job`: waits for that row's answer, no call of its own), else the tenant's stored
   * answer (`cache`), else the categoriser (`model`), whose answer is then stored. Rejects as the
   * categoriser does; a failed question is asked again by the next row that has it.
   */
  answer(transaction: CategorisableTransaction, row: number): Promise<AnsweredRow>;
}

export interface JobAnswersOptions {
  tenantId: string;
  /** For the metrics' `kind` label. */
  jobKind: string;
  categories: readonly CategoryChoice[];
  /** Asks the model; its `model` is part of the key. */
  categoriser: Pick<Categoriser, "model" | "answer">;
}

/**
 * The job's reads and writes of its tenant's stored answers. Rows in flight ask at about the same
 * time: what they ask while a read (or a write) is running goes together in the next one, so a job
 * pays one statement for a batch of rows, not one per row (lib/core/coalesce.ts). A read that fails
 * is logged and is a miss (the row is asked); a write that fails is logged, never thrown (the row
 * has its answer, only its reuse is lost).
 */
function storedAnswers(tenantId: string) {
  const lookUp = coalesce(async (keys: string[]) => {
    try {
      const found = await answersFromCache(tenantId, keys);
      return keys.map((key) => found.get(key) ?? null);
    } catch (err) {
      log.warn({ err, tenantId }, "could not read the stored category answers; asking the model");
      return keys.map(() => null);
    }
  });
  const store = coalesce(async (answers: { key: string; answer: StoredAnswer }[]) => {
    try {
      await rememberAnswers(
        answers.map(({ key, answer }) => ({ ...answer, tenantId, key, promptVersion: CATEGORY_PROMPT_VERSION })),
      );
    } catch (err) {
      log.warn({ err, tenantId }, "could not store category answers");
    }
    return answers.map(() => undefined);
  });
  return {
    lookUp: (key: string): Promise<StoredAnswer | null> => lookUp(key),
    store: (key: string, answer: StoredAnswer): Promise<void> => store({ key, answer }),
  };
}

/** `bounded_category_answers_total` and, for a reused answer, the tokens and cost it saved. */
function countAnswer(kind: string, answer: AnsweredRow): void {
  if (answer.source === "model") {
    metrics.categoryAnswered({ kind, source: "model" });
    return;
  }
  metrics.categoryAnswered(
    { kind, source: answer.source },
    {
      promptTokens: answer.promptTokens,
      completionTokens: answer.completionTokens,
      costUsd: estimateCostUsd(answer.model, answer.promptTokens, answer.completionTokens, env().BOUNDED_MODEL_PRICES),
    },
  );
}

/**
 * One job's answers: identical questions share one answer, and the tenant's stored ones are reused.
 * With `BOUNDED_CATEGORY_ANSWER_REUSE=0` every row asks the model and nothing is stored.
 */
export function createJobAnswers(options: JobAnswersOptions): JobAnswers {
  const { tenantId, jobKind, categories, categoriser } = options;
  const model = categoriser.model;
  if (!env().BOUNDED_CATEGORY_ANSWER_REUSE)
    return {
      async answer(transaction, row) {
        const answer: AnsweredRow = { ...(await categoriser.answer(transaction, row)), source: "model" };
        countAnswer(jobKind, answer);
        return answer;
      },
    };
  const asked = new Map<string, Promise<AnsweredRow>>();
  const stored = storedAnswers(tenantId);

  const ask = async (transaction: CategorisableTransaction, row: number, key: string): Promise<AnsweredRow> => {
    const earlier = await stored.lookUp(key);
    if (earlier) return { ...earlier, source: "cache" };
    const answer: StoredAnswer = await categoriser.answer(transaction, row);
    // Stored under the model that answered: a fallback provider's answer is never taken for the
    // categoriser's model's (the key names the model).
    await stored.store(
      answer.model === model ? key : categoryAnswerKey({ transaction, categories, model: answer.model }),
      answer,
    );
    return { ...answer, source: "model" };
  };

  return {
    async answer(transaction, row) {
      const key = categoryAnswerKey({ transaction, categories, model });
      const earlier = asked.get(key);
      if (earlier !== undefined) {
        const answer: AnsweredRow = { ...(await earlier), source: "job" };
        countAnswer(jobKind, answer);
        return answer;
      }
      const pending = ask(transaction, row, key);
      asked.set(key, pending);
      if (asked.size > MAX_JOB_ANSWERS) asked.delete(asked.keys().next().value!);
      // A failed question is not shared with later rows: they ask again.
      pending.catch(() => {
        if (asked.get(key) === pending) asked.delete(key);
      });
      const answer = await pending;
      countAnswer(jobKind, answer);
      return answer;
    },
  };
}
