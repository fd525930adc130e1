import type { IncomingMessage } from "node:http";
import { z } from "zod";
import { HttpError, type Route } from "./router";

/**
 * How the model simulator refuses a call the way OpenAI's API does, body for body, so that what
 * Bounded makes of a misconfiguration (a wrong key, model or URL) or of one oversized request is
 * learnt against the real shapes: 401 `invalid_api_key`, 404 `model_not_found`, 400
 * `context_length_exceeded` (the router answers an unknown path with 404 `unknown_url`). The
 * messages are OpenAI's own wording, checked against answers the public has quoted from it.
 */

export interface ModelRefusalsOptions {
  /** The key every call must carry as `Authorization: Bearer <key>`; undefined: any key or none. */
  apiKey?: string;
  /** The model names served; any other is `model_not_found`. */
  models: readonly string[];
  /** Prompt tokens plus the completion asked for, at most. */
  contextTokens: number;
}

export interface ModelRefusals {
  /** The route with the key checked before its handler runs. */
  guard(route: Route): Route;
  /** Throws the 404 `model_not_found` for a model the simulator does not serve. */
  requireModel(model: string): void;
  /** Throws the 400 `context_length_exceeded` for a request over the context length. */
  requireFits(tokens: { prompt: number; completion?: number | null }): void;
  models: readonly string[];
}

const API_KEYS_PAGE = "https://platform.openai.com/account/api-keys";

/**
 * A wrong key as OpenAI echoes it: its start and its last four characters, the rest starred — and
 * a short one starred whole, so the message never gives a key away.
 */
export function maskApiKey(key: string): string {
  if (key.length <= 12) return "*".repeat(key.length);
  return `${key.slice(0, 3)}${"*".repeat(key.length - 7)}${key.slice(-4)}`;
}

/** What the `Authorization` header carries after `Bearer `; undefined when it carries no bearer token. */
function bearerOf(req: IncomingMessage): string | undefined {
  const match = /^Bearer\s+(\S.*)$/i.exec(req.headers.authorization ?? "");
  return match?.[1]?.trim();
}

export function checkApiKey(req: IncomingMessage, apiKey: string | undefined): void {
  if (apiKey === undefined) return;
  const given = bearerOf(req);
  if (given === undefined) {
    throw new HttpError(
      401,
      `You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from ${API_KEYS_PAGE}.`,
      "invalid_request_error",
    );
  }
  if (given !== apiKey) {
    throw new HttpError(
      401,
      `Incorrect API key provided: ${maskApiKey(given)}. You can find your API key at ${API_KEYS_PAGE}.`,
      "invalid_request_error",
      { code: "invalid_api_key" },
    );
  }
}

/** The completion a request asks room for: `max_completion_tokens`, or the older `max_tokens`. */
export const completionLimitSchema = z
  .object({
    max_completion_tokens: z.number().int().positive().nullish(),
    max_tokens: z.number().int().positive().nullish(),
  })
  .transform((r) => r.max_completion_tokens ?? r.max_tokens ?? null)
  .catch(null);

export function createModelRefusals(options: ModelRefusalsOptions): ModelRefusals {
  const { apiKey, models, contextTokens } = options;
  return {
    models,
    guard: (route) => ({
      ...route,
      handler: (context) => {
        checkApiKey(context.req, apiKey);
        return route.handler(context);
      },
    }),
    requireModel(model) {
      if (!models.includes(model)) {
        throw new HttpError(
          404,
          `The model \`${model}\` does not exist or you do not have access to it.`,
          "invalid_request_error",
          { code: "model_not_found" },
        );
      }
    },
    requireFits({ prompt, completion }) {
      const total = prompt + (completion ?? 0);
      if (total <= contextTokens) return;
      const message = completion
        ? `This model's maximum context length is ${contextTokens} tokens. However, you requested ${total} tokens (${prompt} in the messages, ${completion} in the completion). Please reduce the length of the messages or completion.`
        : `This model's maximum context length is ${contextTokens} tokens. However, your messages resulted in ${prompt} tokens. Please reduce the length of the messages.`;
      throw new HttpError(400, message, "invalid_request_error", {
        code: "context_length_exceeded",
        param: "messages",
      });
    },
  };
}
