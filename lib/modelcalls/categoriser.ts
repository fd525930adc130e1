import { logger } from "@/lib/log";
import { knownTokenLimit } from "@/lib/ratelimit/provider";
import { routeFor } from "@/lib/model-providers";
import { chatCompletion, type ChatCompletionOptions, type AnswerTokens } from "./chat-completion";
import {
  buildCategoryPrompt,
  categoryQuestion,
  DIRECTION_WORDS,
  parseCategoryAnswer,
  slugNamed,
  type CategorisableTransaction,
  type CategoryChoice,
} from "./choose-category";
import type { ChatMessage } from "./schemas";
import { countPromptTokens, countTextTokens } from "./tokens";

const log = logger("modelcalls");

/**
 * How long a row waits for company before its batch is sent. Real milliseconds, never time-scaled:
 * it covers the machine's own latency (rows of a job reach `categorise` as their neighbours
 * commit and free their places, a few at a time), not a modelled duration. 50 ms fills batches
 * (measured: 5.9 rows a call at 15 ms) and is under 1 % of a median model call (5.5 s).
 */
const DEFAULT_LINGER_MS = 50;

/**
 * How long one attempt of a call may run (production ms) before it is abandoned and sent again —
 * a batch or a single row. A batch of 8 has a p99 of ≈ 60 s (35 s × 1.7), a single row 35 s; the
 * provider's far tail (rare calls of 1–11 min) is a stuck request far more often than a slow
 * answer, and a fresh attempt answers at the median. Without it one tail call holds a provider
 * slot and its rows for up to 19 min — longer than the whole import's budget — and a job whose
 * rows run one after another cannot be sized to fit its budget at all: a single 11 min call
 * outlasts the 10 min default.
 */
const ATTEMPT_TIMEOUT_MS = 120_000;

/**
 * How long a request may go unanswered (production ms) before the same question is sent again
 * beside it, when a provider slot is free that no call waits for (`hedgeAfterMs`): 40 s, past a
 * single row's p99 (35 s) and about a batch of 8's p97, so about one batch in thirty is sent twice
 * and only while slots would sit idle — at the end of an import, where one call in the provider's
 * tail otherwise holds the whole job until the attempt timeout and the attempt after it. A category
 * question has no side effect, so asking it twice is safe; the request not taken is cancelled.
 */
const HEDGE_AFTER_MS = 40_000;

/**
 * The largest share of the provider's tokens per minute one batch may ask for. A quarter: a
 * minute's budget holds at least four batches, so one batch of very long rows never waits for a
 * whole minute's budget alone (nor asks for more than the provider would ever admit), while batches
 * of ordinary rows (≈ 700 tokens) stay whole under any limit above a few thousand tokens a minute.
 */
const MAX_BATCH_SHARE_OF_TPM = 0.25;

/** The chat-completion options (signal, context, retries, endpoint…) less the messages, which are built here. */
export interface CategoriserOptions extends Omit<ChatCompletionOptions, "messages"> {
  /** The allowed categories; the list is expected to contain `other`. */
  categories: CategoryChoice[];
  /** Rows per model call; a batch is sent as soon as it has this many. An integer ≥ 1. */
  batchSize: number;
  /** The longest a row waits for a batch to fill, in real ms. @defaultValue 50 */
  lingerMs?: number;
  /**
   * The most prompt tokens one batch may take: a row that would take the batch past it goes into
   * the next one (a single row is always sent).
   * @defaultValue a quarter of the model's tokens per minute when one is known (configured or learnt), else none
   */
  maxBatchTokens?: number;
}

/**
 * One row's category and what it cost: the row's share of the call that answered it (a batch's
 * tokens and the call itself divided by its rows), plus the whole single-row call when the batch
 * answer left the row out and it was asked again on its own. Tokens the server did not report
 * count as 0.
 */
export interface RowAnswer {
  slug: string;
  /** The model that answered: the categoriser's, or a fallback provider's when its provider was down. */
  model: string;
  promptTokens: number;
  completionTokens: number;
  /** Calls spent on the row: 1/rows of its batch (+1 when asked again alone). */
  callShare: number;
}

export interface Categoriser {
  /**
   * The model asked first: the options' `model`, else the first provider's of its route (the
   * options' or its kind's). Answers are stored and found under the model that gave them.
   */
  readonly model: string;
  /**
   * One row's category slug, asked together with the rows that arrive with it. Rejects with the
   * batch call's error (a `ModelCallError` after retries) or, once the signal has aborted, with
   * its reason, unchanged.
   */
  categorise(transaction: CategorisableTransaction, row: number): Promise<string>;
  /** As `categorise`, with the row's share of what its answer cost. */
  answer(transaction: CategorisableTransaction, row: number): Promise<RowAnswer>;
  /** Stops listening to the signal; rows not yet sent are rejected and new ones refused. */
  close(): void;
}

interface PendingRow {
  id: string;
  transaction: CategorisableTransaction;
  /** The tokens of the row's line in the batch prompt. */
  tokens: number;
  resolve(answer: RowAnswer): void;
  reject(err: unknown): void;
}

/** The row's share of a call that answered `rows` rows. */
function shareOf(usage: AnswerTokens, rows: number): Omit<RowAnswer, "slug" | "model"> {
  return {
    promptTokens: (usage.promptTokens ?? 0) / rows,
    completionTokens: (usage.completionTokens ?? 0) / rows,
    callShare: 1 / rows,
  };
}

/** A categoriser's settings, and the batch it is filling: the rows waiting, their tokens, the linger timer. */
interface BatchState {
  categories: CategoryChoice[];
  slugs: string[];
  batchSize: number;
  lingerMs: number;
  maxBatchTokens: number | undefined;
  /** The options of every chat completion, less the messages. */
  call: Omit<CategoriserOptions, "categories" | "batchSize" | "lingerMs" | "maxBatchTokens">;
  /** What every batch's prompt takes besides its rows (instructions, the category list). */
  fixedTokens: number;
  waiting: PendingRow[];
  waitingTokens: number;
  timer: NodeJS.Timeout | undefined;
  closed: boolean;
  /** Rejects the rows not yet sent with the signal's reason. */
  onAbort: () => void;
}

/** The most prompt tokens one batch may take: the option, else a share of the model's known tokens per minute. */
function batchTokenLimit(state: BatchState): number {
  if (state.maxBatchTokens !== undefined) return state.maxBatchTokens;
  const tpm = knownTokenLimit("model");
  return tpm === undefined ? Infinity : tpm * MAX_BATCH_SHARE_OF_TPM;
}

/** Empties the batch being filled (its linger timer stopped) and returns its rows. */
function takeWaiting(state: BatchState): PendingRow[] {
  clearTimeout(state.timer);
  state.timer = undefined;
  const rows = state.waiting;
  state.waiting = [];
  state.waitingTokens = 0;
  return rows;
}

/** Sends the batch being filled, if it has rows, without waiting for its answer. */
function flush(state: BatchState): void {
  const rows = takeWaiting(state);
  if (rows.length > 0) void send(state, rows);
}

/**
 * Asks one row on its own, with the single-row prompt, and settles it. `spent`: the row's share of
 * a batch call that left it unanswered, added to this call's cost.
 */
function single(state: BatchState, row: PendingRow, spent?: Omit<RowAnswer, "slug" | "model">): Promise<void> {
  const { call, categories, slugs } = state;
  return chatCompletion({
    temperature: 0,
    attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
    hedgeAfterMs: HEDGE_AFTER_MS,
    ...call,
    context: { ...call.context, batchSize: 1 },
    messages: buildCategoryPrompt(row.transaction, categories),
  }).then(({ content, usage, model }) => {
    const own = shareOf(usage, 1);
    row.resolve({
      slug: parseCategoryAnswer(content, slugs),
      model,
      promptTokens: own.promptTokens + (spent?.promptTokens ?? 0),
      completionTokens: own.completionTokens + (spent?.completionTokens ?? 0),
      callShare: own.callShare + (spent?.callShare ?? 0),
    });
  }, row.reject);
}

/** Asks a batch's rows in one call and settles them; the rows its answer leaves out are asked again one by one. */
async function send(state: BatchState, rows: PendingRow[]): Promise<void> {
  if (rows.length === 1) return single(state, rows[0]!);
  const { call, categories, slugs } = state;
  const { context } = call;
  let content: string;
  let usage: AnswerTokens;
  let model: string;
  try {
    ({ content, usage, model } = await chatCompletion({
      temperature: 0,
      attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
      hedgeAfterMs: HEDGE_AFTER_MS,
      ...call,
      context: { ...context, batchSize: rows.length },
      messages: buildBatchCategoryPrompt(rows, categories),
      promptTokens: batchPromptTokens(state.fixedTokens, rows),
    }));
  } catch (err) {
    for (const row of rows) row.reject(err);
    return;
  }
  const answers = parseBatchCategoryAnswer(
    content,
    rows.map((r) => r.id),
    slugs,
  );
  const unanswered = rows.filter((row) => !answers.has(row.id));
  const share = shareOf(usage, rows.length);
  for (const row of rows) {
    const slug = answers.get(row.id);
    if (slug !== undefined) row.resolve({ slug, model, ...share });
  }
  if (unanswered.length > 0) {
    log.warn(
      { ...context, rows: rows.length, unanswered: unanswered.length },
      "batch answer left rows unanswered, asking them one by one",
    );
    await Promise.all(unanswered.map((row) => single(state, row, share)));
  }
}

/** A batch prompt's tokens without its rows. */
export function batchFixedTokens(categories: CategoryChoice[]): number {
  return countPromptTokens(buildBatchCategoryPrompt([], categories));
}

/**
 * A batch prompt's tokens from what was counted as its rows joined: the prompt without rows, each
 * row's line, and the answer's example, which names the first two ids — within a token or two of
 * counting the whole prompt, for a fraction of its CPU.
 */
export function batchPromptTokens(fixedTokens: number, rows: readonly { id: string; tokens: number }[]): number {
  const example = rows
    .slice(0, 2)
    .map((r) => `${JSON.stringify(r.id)}: "<slug>"`)
    .join(", ");
  const exampleTokens = countTextTokens(` like {${example}}.`) - countTextTokens(" like {}.");
  return fixedTokens + rows.reduce((sum, r) => sum + r.tokens, 0) + exampleTokens;
}

/** `Categoriser.answer`: puts the row into the batch being filled, which is sent when full or when its linger ends. */
function answerRow(state: BatchState, transaction: CategorisableTransaction, row: number): Promise<RowAnswer> {
  const { signal } = state.call;
  if (signal.aborted) return Promise.reject(signal.reason);
  if (state.closed) return Promise.reject(new Error("the categoriser is closed"));
  const id = String(row);
  // Ids are what the answer is matched by: a row asked twice goes into the next batch.
  if (state.waiting.some((r) => r.id === id)) flush(state);
  const tokens = batchRowTokens(id, transaction);
  // A row that would take the batch past its share of the token budget starts the next batch.
  if (state.waiting.length > 0 && state.fixedTokens + state.waitingTokens + tokens > batchTokenLimit(state))
    flush(state);
  return new Promise<RowAnswer>((resolve, reject) => {
    state.waiting.push({ id, transaction, tokens, resolve, reject });
    state.waitingTokens += tokens;
    if (state.waiting.length >= state.batchSize) flush(state);
    else state.timer ??= setTimeout(() => flush(state), state.lingerMs);
  });
}

/** `Categoriser.close`: refuses new rows, stops listening to the signal and rejects the rows not yet sent. */
function closeCategoriser(state: BatchState): void {
  state.closed = true;
  state.call.signal.removeEventListener("abort", state.onAbort);
  for (const row of takeWaiting(state)) row.reject(new Error("the categoriser was closed before this row was sent"));
}

/**
 * Collects concurrent `categorise` calls into batched model calls: a batch is sent when it has
 * `batchSize` rows or `lingerMs` after its first row arrived, so a row alone still goes out at once
 * (as the single-row prompt of `chooseCategory`: same call, and an answer that cannot be partial).
 * Every prompt shows a row as its `categoryQuestion` (normalised; no date, amount or currency).
 * A batch is one `chatCompletion` (retries, recording and abort included; every attempt recorded
 * with the batch's size) with the prompt of `buildBatchCategoryPrompt`. The rows its answer names
 * with a listed slug get that slug; every other row — the whole batch when the answer is not JSON —
 * is asked again on its own with the prompt of `chooseCategory`, so a sloppy answer costs calls, never a row.
 * A failed batch call rejects every row of the batch with its error.
 */
export function createCategoriser(options: CategoriserOptions): Categoriser {
  const { categories, batchSize, lingerMs = DEFAULT_LINGER_MS, maxBatchTokens, ...call } = options;
  const { signal } = call;
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new RangeError(`batchSize must be an integer ≥ 1, got ${batchSize}`);
  const slugs = categories.map((c) => c.slug);
  const model = call.model ?? call.route?.[0]?.model ?? routeFor(call.context.jobKind)[0]!.model;
  const state: BatchState = {
    categories,
    slugs,
    batchSize,
    lingerMs,
    maxBatchTokens,
    call,
    fixedTokens: batchFixedTokens(categories),
    waiting: [],
    waitingTokens: 0,
    timer: undefined,
    closed: false,
    // Rows already sent reject through their call, which takes the same signal.
    onAbort: () => {
      for (const row of takeWaiting(state)) row.reject(signal.reason);
    },
  };
  signal.addEventListener("abort", state.onAbort, { once: true });

  const categoriser: Categoriser = {
    model,
    categorise: (transaction, row) => categoriser.answer(transaction, row).then((a) => a.slug),
    answer(transaction, row) {
      return answerRow(state, transaction, row);
    },
    close() {
      closeCategoriser(state);
    },
  };
  return categoriser;
}

/**
 * The prompt of a batch. After the category list (the same `- slug: name` lines as the single-row
 * prompt) comes a `Transactions (one JSON object per line):` line and one JSON object per row, its
 * `categoryQuestion` — `{"id":"12","direction":"money out","counterparty":"rewe markt","description":
 * "card payment 5"}` — JSON so that a description with quotes stays inside its row. The id is the
 * row number. The answer asked for is one JSON object mapping every id to one slug:
 * `{"12": "groceries", "13": "transport"}`.
 */
export function buildBatchCategoryPrompt(
  rows: readonly { id: string; transaction: CategorisableTransaction }[],
  categories: CategoryChoice[],
): ChatMessage[] {
  const list = categories.map((c) => `- ${c.slug}: ${c.name}`).join("\n");
  const lines = rows.map(({ id, transaction }) => batchLine(id, transaction));
  const example = `{${rows
    .slice(0, 2)
    .map((r) => `${JSON.stringify(r.id)}: "<slug>"`)
    .join(", ")}}`;
  return [
    {
      role: "system",
      content:
        "You categorise bank transactions. You are given the allowed categories and several transactions, each with an id. " +
        "Answer with one JSON object that maps every transaction's id to exactly one category slug from the list, and nothing else.",
    },
    {
      role: "user",
      content: [
        "Allowed categories (slug: name):",
        list,
        "",
        "Transactions (one JSON object per line):",
        ...lines,
        "",
        `Answer with one JSON object mapping every id to one slug from the list, like ${example}.`,
      ].join("\n"),
    },
  ];
}

/** The tokens a row adds to a batch prompt: its line (the line break after it joins its last token). */
export function batchRowTokens(id: string, transaction: CategorisableTransaction): number {
  return countTextTokens(batchLine(id, transaction));
}

/** One row's line of a batch prompt: a JSON object with its id and its `categoryQuestion`. */
function batchLine(id: string, t: CategorisableTransaction): string {
  const { direction, counterparty, description } = categoryQuestion(t);
  return JSON.stringify({ id, direction: DIRECTION_WORDS[direction], counterparty, description });
}

/**
 * The rows a batch answer categorises: id → listed slug, for the `ids` asked. Lenient about the
 * wrapping (a `<think>` block, a code fence, a sentence before or after the object, a slug's case
 * or separators), strict about the content: an id not asked, a value that is not exactly one listed
 * slug, or an answer with no JSON object gives no entry, and that row is asked again on its own.
 */
export function parseBatchCategoryAnswer(
  answer: string,
  ids: readonly string[],
  slugs: readonly string[],
): Map<string, string> {
  const answers = new Map<string, string>();
  const parsed = jsonObjectIn(answer.replace(/<think>[\s\S]*?<\/think>/gi, ""));
  if (!parsed) return answers;
  const asked = new Set(ids);
  for (const [key, value] of Object.entries(parsed)) {
    const id = key.trim();
    if (!asked.has(id) || typeof value !== "string") continue;
    const slug = slugNamed(value, slugs);
    if (slug !== undefined) answers.set(id, slug);
  }
  return answers;
}

/** The first JSON object in a text: a fenced block's, else from the first `{` to the last `}`. */
function jsonObjectIn(text: string): Record<string, unknown> | undefined {
  const fenced = /```[a-z]*\s*\n?([\s\S]*?)```/i.exec(text)?.[1];
  for (const candidate of [fenced, text]) {
    if (candidate === undefined) continue;
    const start = candidate.indexOf("{");
    const end = candidate.lastIndexOf("}");
    if (start < 0 || end <= start) continue;
    try {
      const value: unknown = JSON.parse(candidate.slice(start, end + 1));
      if (value !== null && typeof value === "object" && !Array.isArray(value)) return value as Record<string, unknown>;
    } catch {
      // Not JSON: try the next candidate; none left means no answer at all.
    }
  }
  return undefined;
}
