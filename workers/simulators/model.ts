import { createHash, randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionMessage } from "openai/resources/chat/completions";
import type { CompletionUsage } from "openai/resources/completions";
import type { Model } from "openai/resources/models";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import {
  chatCompletionRequestSchema,
  messageText,
  type ChatCompletionRequest,
  type RequestMessage,
  type ToolDefinition,
} from "@/lib/modelcalls/schemas";
import { countPromptTokens, countTextTokens } from "@/lib/modelcalls/tokens";
import { completionLimitSchema, createModelRefusals, type ModelRefusals } from "./model-refusals";
import { simulatedProviderLimits, type SimulatedLimitsOverrides } from "./provider-limits";
import { HttpError, readJson, sendJson, type Route } from "./router";
import {
  createCallerWait,
  sampleLatencyMs,
  sendServerError,
  type LatencyShape,
  type SimulatedService,
  type SimulatorOptions,
} from "./simulated-call";

const log = logger("simulators.model");

/**
 * Production latency of one model call (~100k calls a month): median 5.5 s, p99 35 s, the
 * slowest ~11 min. A lognormal body with a rare uniform tail; σ is chosen so that the p99 of the
 * mixture, tail included, is 35 s (the lognormal alone then needs its 99.1st percentile there).
 */
export const MODEL_LATENCY = {
  medianMs: 5_500,
  sigma: 0.782,
  /** Share of calls in the tail: ~100 a month at production volume. */
  tailShare: 0.001,
  tailFromMs: 60_000,
  maxMs: 660_000,
} as const satisfies LatencyShape;

/** One call's latency in production milliseconds (not yet time-scaled). Pure given `random`. */
export function sampleModelLatencyMs(random: () => number = Math.random): number {
  return sampleLatencyMs(MODEL_LATENCY, random);
}

/**
 * The second simulated provider's latency: a smaller hosted model, quicker in the body (median
 * 3 s) and with a shorter tail (p99 ~15 s, the slowest 5 min).
 */
export const BACKUP_MODEL_LATENCY = {
  medianMs: 3_000,
  sigma: 0.68,
  tailShare: 0.001,
  tailFromMs: 30_000,
  maxMs: 300_000,
} as const satisfies LatencyShape;

/** The simulated model providers: where each is mounted, how slow it is, and what it is by default. */
export const SIMULATED_MODEL_PROVIDERS = {
  model: {
    basePath: "/v1",
    latency: MODEL_LATENCY,
    errorRate: () => env().BOUNDED_SIM_MODEL_ERROR_RATE,
    apiKey: () => env().BOUNDED_SIM_API_KEY,
    models: () => env().BOUNDED_SIM_MODELS,
  },
  "backup-model": {
    basePath: "/backup/v1",
    latency: BACKUP_MODEL_LATENCY,
    errorRate: () => env().BOUNDED_SIM_BACKUP_MODEL_ERROR_RATE,
    apiKey: () => env().BOUNDED_SIM_BACKUP_MODEL_API_KEY,
    models: () => env().BOUNDED_SIM_BACKUP_MODELS,
  },
} as const;

export type SimulatedModelProvider = keyof typeof SIMULATED_MODEL_PROVIDERS;

/**
 * Keyword rules that make the simulated answers look sensible in a demo. A rule answers with the
 * first of its slugs that the prompt allows, so it works with differently named category lists.
 */
const CATEGORY_RULES: { keywords: RegExp; slugs: string[] }[] = [
  { keywords: anyWord("salary", "payroll", "gehalt", "lohn", "wages"), slugs: ["salary", "income"] },
  {
    keywords: anyWord(
      "rewe",
      "edeka",
      "aldi",
      "lidl",
      "kaufland",
      "netto",
      "penny",
      "tesco",
      "supermarkt",
      "supermarket",
      "grocery",
      "groceries",
    ),
    slugs: ["groceries"],
  },
  {
    keywords: anyWord(
      "uber",
      "lyft",
      "db bahn",
      "deutsche bahn",
      "bvg",
      "mvg",
      "hvv",
      "taxi",
      "flixbus",
      "train",
      "aral",
      "shell",
      "fuel",
    ),
    slugs: ["transport", "travel"],
  },
  { keywords: anyWord("rent", "miete", "mortgage", "landlord", "vermieter"), slugs: ["rent", "housing"] },
  {
    keywords: anyWord(
      "restaurant",
      "café",
      "cafe",
      "pizza",
      "pizzeria",
      "burger",
      "mcdonald's",
      "starbucks",
      "lieferando",
      "wolt",
    ),
    slugs: ["dining", "restaurants", "eating-out"],
  },
  {
    keywords: anyWord("netflix", "spotify", "disney+", "cinema", "kino", "concert", "steam"),
    slugs: ["entertainment", "subscriptions"],
  },
  {
    keywords: anyWord(
      "stadtwerke",
      "vattenfall",
      "e.on",
      "electricity",
      "strom",
      "telekom",
      "vodafone",
      "o2",
      "internet",
    ),
    slugs: ["utilities"],
  },
  {
    keywords: anyWord("apotheke", "pharmacy", "doctor", "arzt", "dentist", "zahnarzt", "clinic"),
    slugs: ["health", "healthcare"],
  },
  { keywords: anyWord("amazon", "zalando", "ikea", "mediamarkt", "saturn", "otto"), slugs: ["shopping"] },
  {
    keywords: anyWord("hotel", "airbnb", "lufthansa", "ryanair", "easyjet", "booking.com"),
    slugs: ["travel", "transport"],
  },
  { keywords: anyWord("fee", "fees", "gebühr", "kontoführung", "overdraft"), slugs: ["fees"] },
  { keywords: anyWord("transfer", "überweisung", "sepa", "paypal"), slugs: ["transfers"] },
];

/** Matches any of `words` as whole words, umlauts included (`\b` only knows ASCII letters). */
function anyWord(...words: string[]): RegExp {
  const alternatives = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|");
  return new RegExp(`(?<![\\p{L}\\p{N}])(?:${alternatives})(?![\\p{L}\\p{N}])`, "iu");
}

/**
 * The simulated model's answer: the allowed slugs are the `- slug: name` lines of the prompt and
 * the transaction is what follows a `Transaction:` line (as `buildCategoryPrompt` writes them);
 * keywords are matched on the transaction only, so category names in the list never match.
 * A batch prompt (see `batchRowsOf`) is answered with its JSON mapping instead.
 */
export function simulateCategoryAnswer(messages: RequestMessage[]): string {
  const user = userText(messages);
  const allowed = [...user.matchAll(/^\s*[-*]\s*([a-z0-9][a-z0-9_-]*)\s*(?::|$)/gim)].map((m) => m[1]!.toLowerCase());
  const rows = batchRowsOf(messages);
  if (rows) return simulateBatchAnswer(rows, allowed);
  const marker = /^\s*transaction:?\s*$/im.exec(user);
  const transaction = marker ? user.slice(marker.index + marker[0].length) : user.replace(/^\s*[-*].*$/gm, "");
  return categoryOf(transaction, allowed);
}

/** The first allowed slug of the first keyword rule the text matches; `other` when none does. */
function categoryOf(text: string, allowed: string[]): string {
  const lower = text.toLowerCase();
  for (const rule of CATEGORY_RULES) {
    if (!rule.keywords.test(lower)) continue;
    const slug = allowed.length === 0 ? rule.slugs[0] : rule.slugs.find((s) => allowed.includes(s));
    if (slug) return slug;
  }
  return "other";
}

const userText = (messages: RequestMessage[]) =>
  messages
    .filter((m) => m.role === "user")
    .map(messageText)
    .join("\n");

/** One row of a batch prompt: its id and its transaction's text (counterparty, description…). */
export interface BatchRow {
  id: string;
  text: string;
}

/**
 * The rows of a batch prompt (as `buildBatchCategoryPrompt` writes it: a `Transactions …:` line,
 * then one JSON object with an `id` per line, up to the first line that is not one); undefined
 * for any other prompt, the single-row one included.
 */
export function batchRowsOf(messages: RequestMessage[]): BatchRow[] | undefined {
  const user = userText(messages);
  const heading = /^\s*transactions\b[^\n]*:\s*$/im.exec(user);
  if (!heading) return undefined;
  const rows: BatchRow[] = [];
  for (const line of user
    .slice(heading.index + heading[0].length)
    .replace(/^\s*\n/, "")
    .split("\n")) {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      break;
    }
    if (value === null || typeof value !== "object" || !("id" in value)) break;
    const { id, ...fields } = value as Record<string, unknown>;
    rows.push({ id: String(id), text: Object.values(fields).map(String).join("\n") });
  }
  return rows.length > 0 ? rows : undefined;
}

/**
 * What a test can ask of a batch answer, by writing a marker into a row's description (the
 * single-row prompt ignores them, so the rows asked again on their own are answered properly):
 * - `sim:omit` — that row is left out of the answer;
 * - `sim:bad-slug` — that row is answered with a slug that is not in the list;
 * - `sim:garbage` — the whole answer is a sentence, not JSON;
 * - `sim:chatty` — the JSON comes in a code fence between two sentences, as chat models write it.
 */
export const BATCH_ANSWER_MARKERS = {
  omit: "sim:omit",
  badSlug: "sim:bad-slug",
  garbage: "sim:garbage",
  chatty: "sim:chatty",
} as const;

function simulateBatchAnswer(rows: BatchRow[], allowed: string[]): string {
  const has = (row: BatchRow, marker: string) => row.text.includes(marker);
  if (rows.some((r) => has(r, BATCH_ANSWER_MARKERS.garbage)))
    return "These look like everyday card payments, mostly groceries.";
  const mapping: Record<string, string> = {};
  for (const row of rows) {
    if (has(row, BATCH_ANSWER_MARKERS.omit)) continue;
    mapping[row.id] = has(row, BATCH_ANSWER_MARKERS.badSlug) ? "not-a-listed-category" : categoryOf(row.text, allowed);
  }
  const json = JSON.stringify(mapping);
  return rows.some((r) => has(r, BATCH_ANSWER_MARKERS.chatty))
    ? `Here are the categories:\n\n\`\`\`json\n${json}\n\`\`\`\n\nLet me know if you need more.`
    : json;
}

/**
 * How much longer a call answering `rows` rows takes than a single-row call: 1 + 0.1 × (rows − 1),
 * applied to a sample of the production distribution (median 5.5 s, p99 35 s). Prefill of the
 * extra rows is cheap next to the fixed part of a call (queueing, the round trip, the category
 * list, the first token); what grows is the output, a few tokens per row that decode one after
 * another. 10 % of a single call per row is on the slow side of that, so a batch's cost is not
 * flattered: 8 rows take 1.7× a single call, p99 ≈ 60 s.
 */
export function batchLatencyFactor(rows: number): number {
  return 1 + 0.1 * (Math.max(1, rows) - 1);
}

export interface ModelSimulatorOptions extends SimulatorOptions {
  /** Which provider this is: its path, latency, limits and defaults. @defaultValue "model" (the first, at `/v1`) */
  provider?: SimulatedModelProvider;
  /** Share of calls answered with a 500 (after their latency). @defaultValue `env().BOUNDED_SIM_MODEL_ERROR_RATE` (the second provider: `_BACKUP_MODEL_`) */
  errorRate?: number;
  /** One call's production latency in ms, before scaling. @defaultValue a draw of the provider's latency */
  latencyMs?: () => number;
  /** Calls in flight and requests per production second before a 429. @defaultValue `BOUNDED_SIM_MODEL_CONCURRENCY`, `_RPS` */
  limits?: SimulatedLimitsOverrides;
  /** The key every call must carry (401 otherwise); undefined: any or none. @defaultValue `env().BOUNDED_SIM_API_KEY` */
  apiKey?: string;
  /** The model names served (404 `model_not_found` for others). @defaultValue `env().BOUNDED_SIM_MODELS` (unset: `MODEL_NAME`) */
  models?: readonly string[];
  /** Context length in tokens (400 `context_length_exceeded` beyond). @defaultValue `env().BOUNDED_SIM_MODEL_CONTEXT_TOKENS` */
  contextTokens?: number;
}

export type ModelSimulator = SimulatedService;

/** `created` of the listed models: a fixed moment, so listings are the same from run to run. */
const MODELS_CREATED_S = 1_764_547_200;

/**
 * The model endpoint, in the shapes the official OpenAI client reads: `POST /v1/chat/completions`
 * (streamed as server-sent events with `stream: true`; tool calls when the request offers tools;
 * `usage` always), `GET /v1/models` and `/v1/models/:id`; 429 with Retry-After beyond its limits,
 * tokens per minute included, and OpenAI's `x-ratelimit-*` headers on every answer of the
 * endpoint (`GET /v1/_stats` counts them).
 */
export function createModelSimulator(options: ModelSimulatorOptions = {}): ModelSimulator {
  const name = options.provider ?? "model";
  const provider = SIMULATED_MODEL_PROVIDERS[name];
  const base = provider.basePath;
  const errorRate = options.errorRate ?? provider.errorRate();
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const random = options.random ?? Math.random;
  const latencyMs = options.latencyMs ?? (() => sampleLatencyMs(provider.latency, random));
  const caller = createCallerWait(timeScale, log, options.slowdown);
  const limits = simulatedProviderLimits(name, timeScale, options.limits);
  const refusals = modelRefusalsOf(options);

  const chatCompletions: Route = {
    method: "POST",
    path: `${base}/chat/completions`,
    handler: async ({ req, res }) => {
      const body = await readJson(req);
      const parsed = chatCompletionRequestSchema.safeParse(body);
      if (!parsed.success)
        throw new HttpError(400, `invalid request: ${parsed.error.issues[0]?.message ?? "bad body"}`);
      const request = parsed.data;
      refusals.requireModel(request.model);
      refusals.requireFits({
        prompt: countPromptTokens(request.messages, request.tools),
        completion: completionLimitSchema.parse(body),
      });
      // 429 beyond the provider's limits, tokens per minute included (./provider-limits.ts).
      if (!limits.admit(res, countPromptTokens(request.messages, request.tools))) return;

      const rows = batchRowsOf(request.messages)?.length ?? 1;
      if (!(await caller.wait({ req, res }, () => latencyMs() * batchLatencyFactor(rows)))) return;
      if (random() < errorRate) {
        sendServerError(res, "The server had an error while processing your request.");
        return;
      }
      const answer = simulateAnswer(request);
      // The completion's tokens count against the minute when they are produced, as usage reports them.
      limits.charge(res, usageOf(request, answer).completion_tokens);
      if (request.stream) sendStream(res, request, answer);
      else sendJson(res, 200, completion(request, answer));
    },
  };

  const model = (id: string): Model => ({
    id,
    object: "model",
    created: MODELS_CREATED_S,
    owned_by: "bounded-simulator",
  });
  const models: Route[] = [
    {
      method: "GET",
      path: `${base}/models`,
      handler: ({ res }) => sendJson(res, 200, { object: "list", data: refusals.models.map(model) }),
    },
    {
      method: "GET",
      path: `${base}/models/:id`,
      handler: ({ res, params }) => {
        refusals.requireModel(params.id!);
        sendJson(res, 200, model(params.id!));
      },
    },
  ];

  // The provider's API asks for the key; the simulator's own counters (`/v1/_stats`) do not.
  return { routes: [chatCompletions, ...models].map(refusals.guard).concat(limits.routes), inFlight: caller.inFlight };
}

/** OpenAI's refusals of a wrong key, an unknown model, an oversized request (./model-refusals.ts), as configured. */
export function modelRefusalsOf(options: ModelSimulatorOptions): ModelRefusals {
  const provider = SIMULATED_MODEL_PROVIDERS[options.provider ?? "model"];
  return createModelRefusals({
    apiKey: "apiKey" in options ? options.apiKey : provider.apiKey(),
    models: options.models ?? provider.models(),
    contextTokens: options.contextTokens ?? env().BOUNDED_SIM_MODEL_CONTEXT_TOKENS,
  });
}

/** What the simulated model answers: text, or a call of one of the request's tools. */
export type SimulatedAnswer = { content: string } | { toolCall: { id: string; name: string; arguments: string } };

/**
 * A request that offers tools (and does not forbid them) is answered with a call of its first
 * tool, unless the last message already is a tool's result: then the model answers in words, as a
 * model does once it has what it asked for. The arguments are built from the last user message
 * (`argumentsFor`), so the same request always gets the same call.
 */
export function simulateAnswer(request: ChatCompletionRequest): SimulatedAnswer {
  const tool = request.tools?.[0];
  if (tool && request.tool_choice !== "none" && request.messages.at(-1)?.role !== "tool") {
    const args = JSON.stringify(argumentsFor(tool, request.messages));
    return {
      toolCall: {
        id: `call_${createHash("sha256")
          .update(tool.function.name + args)
          .digest("hex")
          .slice(0, 24)}`,
        name: tool.function.name,
        arguments: args,
      },
    };
  }
  return { content: simulateCategoryAnswer(request.messages) };
}

/**
 * A tool call's arguments: the last user message's text as the first string property of the
 * tool's parameter schema (`{ "input": … }` when it names none).
 */
function argumentsFor(tool: ToolDefinition, messages: RequestMessage[]): Record<string, string> {
  const lastUser = messages.findLast((m) => m.role === "user");
  const text = lastUser ? messageText(lastUser) : "";
  const properties = (tool.function.parameters?.properties ?? {}) as Record<string, { type?: unknown }>;
  const name = Object.keys(properties).find((key) => properties[key]?.type === "string") ?? "input";
  return { [name]: text };
}

/** Usage as an OpenAI-style provider counts it: the prompt with its chat framing, the answer's text (lib/modelcalls/tokens.ts). */
export function usageOf(request: ChatCompletionRequest, answer: SimulatedAnswer): CompletionUsage {
  const prompt = countPromptTokens(request.messages, request.tools);
  const completion = Math.max(
    1,
    countTextTokens("content" in answer ? answer.content : answer.toolCall.name + answer.toolCall.arguments),
  );
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** The `chat.completion` body of an answer, as the endpoint sends it (and the batch service writes it). */
export function completion(request: ChatCompletionRequest, answer: SimulatedAnswer): ChatCompletion {
  const message: ChatCompletionMessage =
    "content" in answer
      ? { role: "assistant", content: answer.content, refusal: null }
      : {
          role: "assistant",
          content: null,
          refusal: null,
          tool_calls: [
            {
              id: answer.toolCall.id,
              type: "function",
              function: { name: answer.toolCall.name, arguments: answer.toolCall.arguments },
            },
          ],
        };
  return {
    id: `chatcmpl-sim-${randomUUID()}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: request.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: "content" in answer ? "stop" : "tool_calls" }],
    usage: usageOf(request, answer),
  };
}

/** Characters per streamed delta: a few tokens, so even a one-word answer comes in several chunks. */
const STREAM_PIECE_CHARS = 8;

function pieces(text: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += STREAM_PIECE_CHARS) out.push(text.slice(i, i + STREAM_PIECE_CHARS));
  return out.length > 0 ? out : [""];
}

/**
 * The answer as OpenAI streams it: `data: {chunk}` events — the role first, then the text (or the
 * tool call's arguments) in pieces, then the finish reason; with `stream_options.include_usage`
 * a last chunk with no choices and the usage — and `data: [DONE]`.
 */
function sendStream(res: ServerResponse, request: ChatCompletionRequest, answer: SimulatedAnswer): void {
  const base = {
    id: `chatcmpl-sim-${randomUUID()}`,
    object: "chat.completion.chunk" as const,
    created: Math.floor(Date.now() / 1000),
    model: request.model,
  };
  const withUsage = request.stream_options?.include_usage === true;
  const chunk = (
    delta: ChatCompletionChunk.Choice.Delta,
    finish: ChatCompletionChunk.Choice["finish_reason"] = null,
  ): ChatCompletionChunk => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...(withUsage ? { usage: null } : {}),
  });
  const chunks: ChatCompletionChunk[] = [chunk({ role: "assistant", content: "content" in answer ? "" : null })];
  if ("content" in answer) {
    for (const piece of pieces(answer.content)) chunks.push(chunk({ content: piece }));
    chunks.push(chunk({}, "stop"));
  } else {
    const { id, name, arguments: args } = answer.toolCall;
    chunks.push(chunk({ tool_calls: [{ index: 0, id, type: "function", function: { name, arguments: "" } }] }));
    for (const piece of pieces(args))
      chunks.push(chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] }));
    chunks.push(chunk({}, "tool_calls"));
  }
  if (withUsage) chunks.push({ ...base, choices: [], usage: usageOf(request, answer) });

  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  for (const c of chunks) res.write(`data: ${JSON.stringify(c)}\n\n`);
  res.end("data: [DONE]\n\n");
}
