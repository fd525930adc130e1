import OpenAI, { RateLimitError } from "openai";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb } from "@/lib/db/client";
import { countPromptTokens, countTextTokens } from "@/lib/modelcalls/tokens";
import { closeRedis } from "@/lib/redis/client";
import { parseResetDuration, readAnnouncedLimits } from "@/lib/ratelimit/provider-headers";
import type { ProviderLimitsStats } from "./provider-limits";
import { startSimulators, type RunningSimulators } from "./server";

/**
 * The model simulator's tokens per minute and its rate-limit headers, read through the official
 * OpenAI client (`withResponse()` gives the headers of an answer, `APIError.headers` those of a 429).
 */

const sims: RunningSimulators[] = [];
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await closeRedis();
  await closeDb();
});

/** Production time (scale 1) and an instant answer: the token bucket refills at the announced minute, no faster. */
async function simulator(tpm: number | undefined, rps = 1_000): Promise<{ sim: RunningSimulators; client: OpenAI }> {
  const sim = await startSimulators({
    port: 0,
    model: {
      errorRate: 0,
      timeScale: 1,
      latencyMs: () => 0,
      limits: { concurrency: 100, rps, ...(tpm === undefined ? {} : { tpm }) },
    },
  });
  sims.push(sim);
  return { sim, client: new OpenAI({ baseURL: sim.modelBaseUrl, apiKey: "sk-simulator", maxRetries: 0 }) };
}

const messages = [
  {
    role: "user" as const,
    content:
      "Allowed categories (slug: name):\n- groceries: Groceries\n- other: Other\n\nTransaction:\nREWE Markt, weekly shop",
  },
];
const promptTokens = countPromptTokens(messages);
const answerTokens = countTextTokens("groceries");

describe("the model simulator's tokens per minute (official OpenAI client)", () => {
  it("announces OpenAI's x-ratelimit-* headers on every answer: the limits, what remains after this call's prompt and answer, and when each is whole again", async () => {
    const { client } = await simulator(10_000, 2);
    const sentAt = Date.now();
    const first = await client.chat.completions.create({ model: "bounded-sim-1", messages }).withResponse();
    const tookMs = Date.now() - sentAt;
    const h = first.response.headers;
    expect(first.data.usage).toMatchObject({ prompt_tokens: promptTokens, completion_tokens: answerTokens });
    expect(h.get("x-ratelimit-limit-tokens")).toBe("10000");
    // Counted as the provider counts: the prompt's and the answer's tokens, as usage reports them.
    // (Tokens may have come back in the milliseconds the call took: 10,000 a minute is one every 6 ms.)
    const remaining = Number(h.get("x-ratelimit-remaining-tokens"));
    expect(remaining).toBeGreaterThanOrEqual(10_000 - promptTokens - answerTokens);
    expect(remaining).toBeLessThanOrEqual(10_000 - promptTokens - answerTokens + Math.ceil(tookMs / 6) + 1);
    expect(h.get("x-ratelimit-limit-requests")).toBe("120");
    expect(Number(h.get("x-ratelimit-remaining-requests"))).toBe(119);
    // OpenAI's duration format: what was used comes back at 10,000 a minute.
    expect(h.get("x-ratelimit-reset-tokens")).toMatch(/^\d+(\.\d+)?(ms|s)$/);
    const resetMs = parseResetDuration(h.get("x-ratelimit-reset-tokens"))!;
    expect(resetMs).toBeGreaterThan(((promptTokens + answerTokens - 1) / 10_000) * 60_000 - 50);
    expect(resetMs).toBeLessThanOrEqual(((promptTokens + answerTokens) / 10_000) * 60_000 + 1);
    expect(h.get("x-ratelimit-reset-requests")).toMatch(/^\d+(\.\d+)?(ms|s)$/);
    expect(readAnnouncedLimits((name) => h.get(name))?.tokens.tokens).toMatchObject({ limit: 10_000, remaining });

    const second = await client.chat.completions.create({ model: "bounded-sim-1", messages }).withResponse();
    expect(Number(second.response.headers.get("x-ratelimit-remaining-tokens"))).toBeLessThan(
      Number(h.get("x-ratelimit-remaining-tokens")),
    );
  });

  it("answers 429 with OpenAI's error body, Retry-After and the headers once a minute's tokens are spent, with the wait the prompt needs", async () => {
    // Room for exactly two calls a minute.
    const tpm = 2 * (promptTokens + answerTokens);
    const { sim, client } = await simulator(tpm);
    await client.chat.completions.create({ model: "bounded-sim-1", messages });
    await client.chat.completions.create({ model: "bounded-sim-1", messages });
    const refused = await client.chat.completions
      .create({ model: "bounded-sim-1", messages })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(RateLimitError);
    const err = refused as RateLimitError;
    expect(err.status).toBe(429);
    expect(err.error).toMatchObject({ type: "tokens", code: "rate_limit_exceeded" });
    expect((err.error as { message: string }).message).toMatch(
      /tokens per min \(TPM\): Limit \d+, Used \d+, Requested \d+/,
    );
    expect(err.headers?.get("x-ratelimit-remaining-tokens")).toBe("0");
    expect(err.headers?.get("x-ratelimit-limit-tokens")).toBe(String(tpm));
    // The wait is what the prompt needs at tpm a minute (≈ 60 s ÷ 2 here), as a real provider says it.
    const retryAfterMs = Number(err.headers?.get("retry-after-ms"));
    expect(retryAfterMs).toBeGreaterThan(20_000);
    expect(retryAfterMs).toBeLessThanOrEqual(30_000);
    expect(Number(err.headers?.get("retry-after"))).toBe(Math.ceil(retryAfterMs / 1000));
    const stats = (await (await fetch(`${sim.modelBaseUrl}/_stats`)).json()) as ProviderLimitsStats;
    expect(stats).toMatchObject({
      tpm,
      admitted: 2,
      rejected: { total: 1, tokens: 1 },
      tokensCharged: 2 * (promptTokens + answerTokens),
    });
  });

  it("by default (BOUNDED_SIM_MODEL_TPM) has a limit far above what the demo uses", async () => {
    const { client } = await simulator(undefined);
    const { response } = await client.chat.completions.create({ model: "bounded-sim-1", messages }).withResponse();
    expect(Number(response.headers.get("x-ratelimit-limit-tokens"))).toBe(10_000_000);
  });
});
