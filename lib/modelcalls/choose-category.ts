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
  return parseCategoryAnswer(content, categories.map((c) => c.slug));
}

/**
 * The system and user messages. The transaction follows a `Transaction:` line, after the list,
 * so that the bundled simulator (and a person reading a log) can tell the two apart.
 */
export function buildCategoryPrompt(transaction: CategorisableTransaction, categories: CategoryChoice[]): ChatMessage[] {
  const date = transaction.date instanceof Date ? transaction.date.toISOString().slice(0, 10) : transaction.date;
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
        `Date: ${date}`,
        `Amount: ${transaction.amount} ${transaction.currency}`,
        `Counterparty: ${transaction.counterparty}`,
        `Description: ${transaction.description}`,
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
  return text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, " ").trim();
}
