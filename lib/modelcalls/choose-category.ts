import { chatCompletion, type ChatCompletionOptions } from "./chat-completion";
import type { ChatMessage } from "./schemas";

/** The answer when the model names none of the allowed categories; the list is expected to have it. */
const FALLBACK_CATEGORY = "other";

export interface CategorisableTransaction {
  date: Date | string;
  /** In major units as on the statement (e.g. -42.10), not minor units. */
  amount: number | string;
  currency: string;
  counterparty: string;
  description: string;
}

export interface CategoryChoice {
  slug: string;
  name: string;
}

/**
 * The version of the category prompts' text (`buildCategoryPrompt`, `buildBatchCategoryPrompt`):
 * raise it with any change to what they say, so that answers stored for the old prompt
 * (lib/answers) are not taken for answers to the new one.
 */
export const CATEGORY_PROMPT_VERSION = 3;

/**
 * Everything of a transaction the category prompts show the model, normalised: the counterparty
 * and description trimmed, runs of whitespace as one space, case-folded (NFKC, lower case), every
 * word with three or more digits in it read as `#` (`normaliseText`); the amount only as its
 * direction. The prompts are built from this and from nothing else of the transaction, so two
 * transactions with the same question get the same prompt (and lib/answers may reuse one answer
 * for both).
 */
export interface CategoryQuestion {
  counterparty: string;
  description: string;
  /** Money out (amount < 0), in (> 0), or a zero amount. */
  direction: "out" | "in" | "zero";
}

/** The question the category prompts ask about `transaction` (see `CategoryQuestion`). */
export function categoryQuestion(transaction: CategorisableTransaction): CategoryQuestion {
  const amount = Number(transaction.amount);
  return {
    counterparty: normaliseText(transaction.counterparty),
    description: normaliseText(transaction.description),
    direction: amount < 0 ? "out" : amount > 0 ? "in" : "zero",
  };
}

/**
 * A word with three or more digits: a date, a time, an amount, a card, terminal, mandate, invoice
 * or customer number. It names this one payment, not what kind of payment it is, and bank exports
 * put one in almost every line ("VISA 4871 2026-01-04 14:32 REWE SAGT DANKE", "EREF 88123 Miete
 * Januar"), so a question that kept them would never repeat. A shorter number ("Filiale 7",
 * "7-Eleven", "Zimmer 12") may say what the payment is for, and stays.
 */
const IDENTIFIER = /[^\s]*\d[^\s]*\d[^\s]*\d[^\s]*/gu;

/**
 * Trimmed, whitespace runs (line breaks included) as one space, NFKC, lower case, every word with
 * three or more digits as `#` (`IDENTIFIER`; a run of them as one).
 */
export function normaliseText(text: string): string {
  return text
    .normalize("NFKC")
    .replace(IDENTIFIER, "#")
    .replace(/\s+/gu, " ")
    .replace(/#(?: #)+/gu, "#")
    .trim()
    .toLowerCase();
}

/** How the prompts say a direction. */
export const DIRECTION_WORDS: Record<CategoryQuestion["direction"], string> = {
  out: "money out",
  in: "money in",
  zero: "zero amount",
};

/** The chat-completion options (signal, context, retries…) less the messages, which are built here. */
export interface ChooseCategoryOptions extends Omit<ChatCompletionOptions, "messages"> {
  transaction: CategorisableTransaction;
  categories: CategoryChoice[];
}

/** Asks the model for one category of a bank transaction; returns one of the given slugs. */
export async function chooseCategory(options: ChooseCategoryOptions): Promise<string> {
  const { transaction, categories, ...call } = options;
  const { content } = await chatCompletion({
    temperature: 0,
    ...call,
    messages: buildCategoryPrompt(transaction, categories),
  });
  return parseCategoryAnswer(
    content,
    categories.map((c) => c.slug),
  );
}

/**
 * The system and user messages. The transaction follows a `Transaction:` line, after the list,
 * so that the bundled simulator (and a person reading a log) can tell the two apart. It is shown
 * as its `categoryQuestion` (direction, normalised counterparty and description), nothing more.
 */
export function buildCategoryPrompt(
  transaction: CategorisableTransaction,
  categories: CategoryChoice[],
): ChatMessage[] {
  const question = categoryQuestion(transaction);
  const list = categories.map((c) => `- ${c.slug}: ${c.name}`).join("\n");
  return [
    {
      role: "system",
      content:
        "You categorise bank transactions. Answer with exactly one category slug from the list you are given, and nothing else.",
    },
    {
      role: "user",
      content: [
        "Allowed categories (slug: name):",
        list,
        "",
        "Transaction:",
        `Direction: ${DIRECTION_WORDS[question.direction]}`,
        `Counterparty: ${question.counterparty}`,
        `Description: ${question.description}`,
        "",
        "Answer with exactly one slug from the list.",
      ].join("\n"),
    },
  ];
}

/**
 * Reads a slug out of a model's answer, leniently: models add quotes, full stops, "Category:"
 * prefixes, capitals, or a sentence around the slug. The first listed slug that appears as whole
 * words wins (the longest one when two start at the same place, so "home-office" beats "home");
 * an answer naming none gives `FALLBACK_CATEGORY`.
 */
export function parseCategoryAnswer(answer: string, slugs: readonly string[]): string {
  // Reasoning models may think aloud first, mentioning several categories; only the answer counts.
  const text = ` ${words(answer.replace(/<think>[\s\S]*?<\/think>/gi, ""))} `;
  let best: { slug: string; at: number; length: number } | undefined;
  for (const slug of slugs) {
    const needle = words(slug);
    if (!needle) continue;
    const at = text.indexOf(` ${needle} `);
    if (at < 0) continue;
    if (!best || at < best.at || (at === best.at && needle.length > best.length)) {
      best = { slug, at, length: needle.length };
    }
  }
  return best?.slug ?? FALLBACK_CATEGORY;
}

/**
 * The listed slug that `answer` names and nothing else, compared as words ("Groceries",
 * "home office" and "home_office" name `groceries` and `home-office`); undefined otherwise. Stricter
 * than `parseCategoryAnswer`: for one value of a structured answer, where anything else is no answer.
 */
export function slugNamed(answer: string, slugs: readonly string[]): string | undefined {
  const wanted = words(answer);
  return wanted ? slugs.find((slug) => words(slug) === wanted) : undefined;
}

/** Lower-case words separated by single spaces: punctuation, `-` and `_` all become separators. */
function words(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, " ")
    .trim();
}
