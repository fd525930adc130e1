import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { messageText, type RequestMessage, type ToolDefinition } from "./schemas";

/**
 * Tokens counted the way an OpenAI-style provider counts them, so that what Bounded reserves
 * before a call is what the provider charges for it. The encoding is o200k_base (GPT-4o, 4.1, o-
 * series and their compatible servers), pure JavaScript with its ranks inside the package: nothing
 * is downloaded at run time. The chat framing follows OpenAI's published counting recipe: every
 * message costs its text plus 3 tokens of framing (role and separators), a name 1 more, and every
 * answer is primed with 3. Tool definitions are counted as their JSON, which is close to (a little
 * above) what the provider counts for its own rendering of them.
 */

/** Framing tokens of one message (OpenAI's recipe: `<|start|>{role}<|message|>…<|end|>`). */
const TOKENS_PER_MESSAGE = 3;
/** Tokens that prime every answer (`<|start|>assistant<|message|>`). */
const TOKENS_PER_ANSWER = 3;

/** Tokens of a piece of text. */
export function countTextTokens(text: string): number {
  return text === "" ? 0 : countTokens(text);
}

/** The prompt tokens of a chat-completions request: its messages (and tools, when it offers any). */
export function countPromptTokens(messages: readonly RequestMessage[], tools?: readonly ToolDefinition[]): number {
  let total = TOKENS_PER_ANSWER;
  for (const m of messages) {
    total += TOKENS_PER_MESSAGE + countTextTokens(m.role) + countTextTokens(messageText(m));
    if (m.role === "assistant")
      for (const call of m.tool_calls ?? [])
        total += countTextTokens(call.function.name) + countTextTokens(call.function.arguments);
  }
  if (tools && tools.length > 0) total += countTextTokens(JSON.stringify(tools));
  return total;
}
