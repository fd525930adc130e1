import { randomUUID } from "node:crypto";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { chatCompletionRequestSchema, type ChatCompletionResponse, type ChatMessage } from "@/lib/modelcalls/schemas";
import { simulatedProviderLimits, type SimulatedLimitsOverrides } from "./provider-limits";
import { HttpError, readJson, sendJson, type Route } from "./router";
import { createCallerWait, sampleLatencyMs, sendServerError, type LatencyShape, type SimulatedService, type SimulatorOptions } from "./simulated-call";

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
 * Keyword rules that make the simulated answers look sensible in a demo. A rule answers with the
 * first of its slugs that the prompt allows, so it works with differently named category lists.
 */
const CATEGORY_RULES: { keywords: RegExp; slugs: string[] }[] = [
  { keywords: anyWord("salary", "payroll", "gehalt", "lohn", "wages"), slugs: ["salary", "income"] },
  { keywords: anyWord("rewe", "edeka", "aldi", "lidl", "kaufland", "netto", "penny", "tesco", "supermarkt", "supermarket", "grocery", "groceries"), slugs: ["groceries"] },
  { keywords: anyWord("uber", "lyft", "db bahn", "deutsche bahn", "bvg", "mvg", "hvv", "taxi", "flixbus", "train", "aral", "shell", "fuel"), slugs: ["transport", "travel"] },
  { keywords: anyWord("rent", "miete", "mortgage", "landlord", "vermieter"), slugs: ["rent", "housing"] },
  { keywords: anyWord("restaurant", "café", "cafe", "pizza", "pizzeria", "burger", "mcdonald's", "starbucks", "lieferando", "wolt"), slugs: ["dining", "restaurants", "eating-out"] },
  { keywords: anyWord("netflix", "spotify", "disney+", "cinema", "kino", "concert", "steam"), slugs: ["entertainment", "subscriptions"] },
  { keywords: anyWord("stadtwerke", "vattenfall", "e.on", "electricity", "strom", "telekom", "vodafone", "o2", "internet"), slugs: ["utilities"] },
  { keywords: anyWord("apotheke", "pharmacy", "doctor", "arzt", "dentist", "zahnarzt", "clinic"), slugs: ["health", "healthcare"] },
  { keywords: anyWord("amazon", "zalando", "ikea", "mediamarkt", "saturn", "otto"), slugs: ["shopping"] },
  { keywords: anyWord("hotel", "airbnb", "lufthansa", "ryanair", "easyjet", "booking.com"), slugs: ["travel", "transport"] },
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
export function simulateCategoryAnswer(messages: ChatMessage[]): string {
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

const userText = (messages: ChatMessage[]) => messages.filter((m) => m.role === "user").map((m) => m.content).join("\n");

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
export function batchRowsOf(messages: ChatMessage[]): BatchRow[] | undefined {
  const user = userText(messages);
  const heading = /^\s*transactions\b[^\n]*:\s*$/im.exec(user);
  if (!heading) return undefined;
  const rows: BatchRow[] = [];
  for (const line of user.slice(heading.index + heading[0].length).replace(/^\s*\n/, "").split("\n")) {
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
  if (rows.some((r) => has(r, BATCH_ANSWER_MARKERS.garbage))) return "These look like everyday card payments, mostly groceries.";
  const mapping: Record<string, string> = {};
  for (const row of rows) {
    if (has(row, BATCH_ANSWER_MARKERS.omit)) continue;
    mapping[row.id] = has(row, BATCH_ANSWER_MARKERS.badSlug) ? "not-a-listed-category" : categoryOf(row.text, allowed);
  }
  const json = JSON.stringify(mapping);
  return rows.some((r) => has(r, BATCH_ANSWER_MARKERS.chatty)) ? `Here are the categories:\n\n\`\`\`json\n${json}\n\`\`\`\n\nLet me know if you need more.` : json;
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
  /** Share of calls answered with a 500 (after their latency). @defaultValue `env().BOUNDED_SIM_MODEL_ERROR_RATE` */
  errorRate?: number;
  /** One call's production latency in ms, before scaling. @defaultValue `sampleModelLatencyMs` */
  latencyMs?: () => number;
  /** Calls in flight and requests per production second before a 429. @defaultValue `BOUNDED_SIM_MODEL_CONCURRENCY`, `_RPS` */
  limits?: SimulatedLimitsOverrides;
}

export type ModelSimulator = SimulatedService;

/**
 * The model endpoint: OpenAI-compatible `POST /v1/chat/completions`; 429 with Retry-After beyond
 * its limits (`GET /v1/_stats` counts them).
 */
export function createModelSimulator(options: ModelSimulatorOptions = {}): ModelSimulator {
  const errorRate = options.errorRate ?? env().BOUNDED_SIM_MODEL_ERROR_RATE;
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const random = options.random ?? Math.random;
  const latencyMs = options.latencyMs ?? (() => sampleModelLatencyMs(random));
  const caller = createCallerWait(timeScale, log);
  const limits = simulatedProviderLimits("model", timeScale, options.limits);

  const chatCompletions: Route = {
    method: "POST",
    path: "/v1/chat/completions",
    handler: async ({ req, res }) => {
      if (!limits.admit(res)) return; // 429 beyond the provider's limits (./provider-limits.ts)
      const parsed = chatCompletionRequestSchema.safeParse(await readJson(req));
      if (!parsed.success) throw new HttpError(400, `invalid request: ${parsed.error.issues[0]?.message ?? "bad body"}`);
      const { model, messages } = parsed.data;

      const rows = batchRowsOf(messages)?.length ?? 1;
      if (!(await caller.wait({ req, res }, () => latencyMs() * batchLatencyFactor(rows)))) return;
      if (random() < errorRate) {
        sendServerError(res, "The server had an error while processing your request.");
        return;
      }
      sendJson(res, 200, completion(model, messages, simulateCategoryAnswer(messages)));
    },
  };

  return { routes: [chatCompletions, ...limits.routes], inFlight: caller.inFlight };
}

function completion(model: string, messages: ChatMessage[], content: string): ChatCompletionResponse {
  // Roughly four characters a token: enough for usage figures to look plausible.
  const promptTokens = Math.ceil(messages.reduce((n, m) => n + m.content.length, 0) / 4);
  const completionTokens = Math.max(1, Math.ceil(content.length / 4));
  return {
    id: `chatcmpl-sim-${randomUUID()}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
  };
}
