import { chatCompletion, type ChatCompletionOptions } from "@/lib/modelcalls/chat-completion";
import { storableText } from "@/lib/db/storable";
import type { ChatMessage } from "@/lib/modelcalls/schemas";

/** How much of a document's text the model is shown: the first pages say what a document is. */
const SUMMARY_INPUT_CHARS = 6_000;
/** The stored summary is one sentence; anything longer is cut here. */
const SUMMARY_MAX_CHARS = 500;

const DOCUMENT_KINDS = ["invoice", "receipt", "contract", "letter", "statement", "form", "other"] as const;

export interface SummariseOptions extends Omit<ChatCompletionOptions, "messages"> {
  filename: string;
  text: string;
}

/** The model pass of `bulk_ocr`: what kind of document this is and what it says, in one sentence. */
export async function summariseDocument(options: SummariseOptions): Promise<string> {
  const { filename, text, ...call } = options;
  const { content } = await chatCompletion({ temperature: 0, ...call, messages: buildSummaryPrompt(filename, text) });
  return parseSummaryAnswer(content);
}

function buildSummaryPrompt(filename: string, text: string): ChatMessage[] {
  const shown =
    text.length > SUMMARY_INPUT_CHARS
      ? `${text.slice(0, SUMMARY_INPUT_CHARS)}\n[… ${text.length - SUMMARY_INPUT_CHARS} more characters]`
      : text;
  return [
    {
      role: "system",
      content:
        `You read documents that were scanned and OCR'd. Classify the document as one of ${DOCUMENT_KINDS.join(", ")} ` +
        "and summarise it in one sentence. Answer as `<kind>: <sentence>` and nothing else.",
    },
    { role: "user", content: `File name: ${filename}\n\nDocument text:\n${shown}` },
  ];
}

/**
 * The summary to store: reasoning (`<think>…</think>`) removed, whitespace collapsed, cut to one
 * short paragraph. An empty answer is returned as "" for the caller to refuse.
 */
function parseSummaryAnswer(answer: string): string {
  const flat = storableText(
    answer
      .replace(/<think>[\s\S]*?<\/think>/gi, "")
      .replace(/\s+/g, " ")
      .trim(),
  );
  // Cut on a code point, never between the halves of a surrogate pair.
  return flat.length > SUMMARY_MAX_CHARS ? `${storableText(flat.slice(0, SUMMARY_MAX_CHARS - 1))}…` : flat;
}
