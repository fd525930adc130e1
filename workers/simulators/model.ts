import { randomUUID } from "node:crypto";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { chatCompletionRequestSchema, type ChatCompletionResponse, type ChatMessage } from "@/lib/modelcalls/schemas";
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
 */
export function simulateCategoryAnswer(messages: ChatMessage[]): string {
  const user = messages.filter((m) => m.role === "user").map((m) => m.content).join("\n");
  const allowed = [...user.matchAll(/^\s*[-*]\s*([a-z0-9][a-z0-9_-]*)\s*(?::|$)/gim)].map((m) => m[1]!.toLowerCase());
  const marker = /^\s*transaction:?\s*$/im.exec(user);
  const transaction = (marker ? user.slice(marker.index + marker[0].length) : user.replace(/^\s*[-*].*$/gm, "")).toLowerCase();
  for (const rule of CATEGORY_RULES) {
    if (!rule.keywords.test(transaction)) continue;
    const slug = allowed.length === 0 ? rule.slugs[0] : rule.slugs.find((s) => allowed.includes(s));
    if (slug) return slug;
  }
  return "other";
}

export interface ModelSimulatorOptions extends SimulatorOptions {
  /** Share of calls answered with a 500 (after their latency). @defaultValue `env().BOUNDED_SIM_MODEL_ERROR_RATE` */
  errorRate?: number;
  /** One call's production latency in ms, before scaling. @defaultValue `sampleModelLatencyMs` */
  latencyMs?: () => number;
}

export type ModelSimulator = SimulatedService;

/** The model endpoint: OpenAI-compatible `POST /v1/chat/completions`. */
export function createModelSimulator(options: ModelSimulatorOptions = {}): ModelSimulator {
  const errorRate = options.errorRate ?? env().BOUNDED_SIM_MODEL_ERROR_RATE;
  const timeScale = options.timeScale ?? env().BOUNDED_TIME_SCALE;
  const random = options.random ?? Math.random;
  const latencyMs = options.latencyMs ?? (() => sampleModelLatencyMs(random));
  const caller = createCallerWait(timeScale, log);

  const chatCompletions: Route = {
    method: "POST",
    path: "/v1/chat/completions",
    handler: async ({ req, res }) => {
      const parsed = chatCompletionRequestSchema.safeParse(await readJson(req));
      if (!parsed.success) throw new HttpError(400, `invalid request: ${parsed.error.issues[0]?.message ?? "bad body"}`);
      const { model, messages } = parsed.data;

      if (!(await caller.wait({ req, res }, latencyMs))) return;
      if (random() < errorRate) {
        sendServerError(res, "The server had an error while processing your request.");
        return;
      }
      sendJson(res, 200, completion(model, messages, simulateCategoryAnswer(messages)));
    },
  };

  return { routes: [chatCompletions], inFlight: caller.inFlight };
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
