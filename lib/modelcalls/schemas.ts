import { z } from "zod";

/** One chat message, as OpenAI-compatible servers accept it. */
const chatMessageSchema = z.object({
  role: z.enum(["system", "user", "assistant"]),
  content: z.string(),
});
export type ChatMessage = z.infer<typeof chatMessageSchema>;

/** A message's text: a string, or the text parts OpenAI's API also accepts. */
const textContentSchema = z.union([z.string(), z.array(z.object({ type: z.literal("text"), text: z.string() }))]);

const toolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

/**
 * Any message of a chat-completions request, as OpenAI-compatible servers accept them: besides
 * Bounded's own (`chatMessageSchema`), an assistant message carrying `tool_calls` (its `content`
 * null) and the `tool` message answering one.
 */
const requestMessageSchema = z.discriminatedUnion("role", [
  z.object({ role: z.enum(["system", "developer", "user"]), content: textContentSchema }),
  z.object({
    role: z.literal("assistant"),
    content: textContentSchema.nullable().optional(),
    tool_calls: z.array(toolCallSchema).optional(),
  }),
  z.object({ role: z.literal("tool"), content: textContentSchema, tool_call_id: z.string() }),
]);
export type RequestMessage = z.infer<typeof requestMessageSchema>;

/** A message's text, its parts joined; "" for an assistant message with tool calls only. */
export function messageText(message: RequestMessage): string {
  const content = message.content ?? "";
  return typeof content === "string" ? content : content.map((part) => part.text).join("");
}

/** A function the model may call (`tools[]` of a request). */
const toolSchema = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string().min(1),
    description: z.string().optional(),
    /** A JSON Schema of the arguments. */
    parameters: z.record(z.string(), z.unknown()).optional(),
  }),
});
export type ToolDefinition = z.infer<typeof toolSchema>;

/** The request body of `POST /v1/chat/completions`: what Bounded sends, and what the official client may. */
export const chatCompletionRequestSchema = z.object({
  model: z.string().min(1),
  messages: z.array(requestMessageSchema).min(1),
  temperature: z.number().min(0).max(2).nullable().optional(),
  tools: z.array(toolSchema).optional(),
  tool_choice: z.unknown().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullable().optional(),
});
export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;

/**
 * The response body of a successful chat completion. Only what Bounded reads is required, and
 * unknown fields pass, so any OpenAI-compatible server (vLLM, llama.cpp, Ollama…) is accepted.
 */
export const chatCompletionResponseSchema = z.object({
  id: z.string().optional(),
  object: z.string().optional(),
  created: z.number().optional(),
  model: z.string().optional(),
  choices: z
    .array(
      z.object({
        index: z.number().optional(),
        message: z.object({
          role: z.string(),
          // null when a model answers with tool calls only; Bounded asks for text, so that is an error.
          content: z.string().nullable(),
        }),
        finish_reason: z.string().nullable().optional(),
      }),
    )
    .min(1),
  usage: z
    .object({
      prompt_tokens: z.number(),
      completion_tokens: z.number(),
      total_tokens: z.number(),
    })
    .partial()
    .optional(),
});

/**
 * The most requests one batch (one batch file, one request a line) takes: OpenAI's Batch API limit.
 * `submitBatch` (./batch-service.ts) refuses more, and so does the model simulator's batch service.
 */
export const MAX_BATCH_REQUESTS = 50_000;
