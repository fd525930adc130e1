import { createHash } from "node:crypto";
import {
  CATEGORY_PROMPT_VERSION,
  categoryQuestion,
  type CategorisableTransaction,
  type CategoryChoice,
} from "@/lib/modelcalls/choose-category";

/** What a category answer depends on: everything its prompt is built from, and who answers it. */
export interface AnswerKeyInput {
  transaction: CategorisableTransaction;
  /** The allowed categories, in the order the prompt lists them. */
  categories: readonly CategoryChoice[];
  model: string;
  /** @defaultValue `CATEGORY_PROMPT_VERSION` */
  promptVersion?: number;
}

/**
 * The key of a categorisation: sha256 (hex) of the prompt version, the model, the category list
 * (slug and name, in order) and the transaction's `categoryQuestion` — its direction and its
 * normalised counterparty and description, which is all the prompts show of it. Two rows with
 * the same key get the same prompt from the same model, so one answer serves both; anything the
 * prompt would show differently is a different key.
 */
export function categoryAnswerKey(input: AnswerKeyInput): string {
  const q = categoryQuestion(input.transaction);
  const material = JSON.stringify([
    input.promptVersion ?? CATEGORY_PROMPT_VERSION,
    input.model,
    input.categories.map((c) => [c.slug, c.name]),
    q.direction,
    q.counterparty,
    q.description,
  ]);
  return createHash("sha256").update(material).digest("hex");
}
