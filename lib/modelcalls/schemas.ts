import { z } from "zod";

/** One chat message, as OpenAI-compatible servers accept it. */
const chatMessageSchema = z.object({
  role: z.enum(["system", "user", "assistant"]),
  content: z.string(),
});
export type ChatMessage = z.infer<typeof chatMessageSchema>;

/** The request body of `POST /v1/chat/completions` (the fields Bounded sends). */
export const chatCompletionRequestSchema = z.object({
  model: z.string().min(1),
  messages: z.array(chatMessageSchema).min(1),
  temperature: z.number().min(0).max(2).optional(),
});

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
export type ChatCompletionResponse = z.infer<typeof chatCompletionResponseSchema>;

/** The error body OpenAI-compatible servers send with a 4xx/5xx status. */
const chatCompletionErrorSchema = z.object({
  error: z.object({
    message: z.string(),
    type: z.string().nullable().optional(),
    code: z.union([z.string(), z.number()]).nullable().optional(),
  }),
});
