import { randomUUID } from "node:crypto";
import OpenAI, { APIConnectionTimeoutError, AuthenticationError, BadRequestError, NotFoundError } from "openai";
import type { ChatCompletionChunk, ChatCompletionTool } from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { closeDb } from "@/lib/db/client";
import { env } from "@/lib/env";
import { chatCompletion } from "@/lib/modelcalls/chat-completion";
import { ModelCallError } from "@/lib/modelcalls/errors";
import { flushModelCallRecords, type ModelCallRecord } from "@/lib/modelcalls/record";
import { countPromptTokens, countTextTokens } from "@/lib/modelcalls/tokens";
import { closeRedis } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import type { ModelSimulatorOptions } from "./model";
import { startSimulators, type RunningSimulators } from "./server";

/**
 * The model simulator against the official OpenAI client itself: whatever the client accepts
 * from it, a real OpenAI-compatible server would have to answer the same way.
 */

const sims: RunningSimulators[] = [];
async function simulator(options: ModelSimulatorOptions = {}): Promise<RunningSimulators> {
  const started = await startSimulators({
    port: 0,
    model: { errorRate: 0, timeScale: 0.001, latencyMs: () => 1_000, ...options },
  });
  sims.push(started);
  return started;
}

/** The client as an application would configure it: the base URL with /v1, no retries of its own. */
const openai = (sim: RunningSimulators) =>
  new OpenAI({ baseURL: sim.modelBaseUrl, apiKey: "sk-simulator", maxRetries: 0 });

const question =
  "Allowed categories (slug: name):\n- groceries: Groceries\n- other: Other\n\nTransaction:\nREWE Markt, weekly shop";

const lookup: ChatCompletionTool = {
  type: "function",
  function: {
    name: "lookup_merchant",
    description: "Finds a merchant by name.",
    parameters: {
      type: "object",
      properties: { limit: { type: "integer" }, merchant: { type: "string" } },
      required: ["merchant"],
    },
  },
};

afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await flushModelCallRecords();
  await closeRedis();
  await closeDb();
});

describe("the model simulator through the official OpenAI client", () => {
  let sim: RunningSimulators;
  let client: OpenAI;
  beforeAll(async () => {
    sim = await simulator();
    client = openai(sim);
  });

  it("answers a plain completion with the text and its token usage", async () => {
    const answer = await client.chat.completions.create({
      model: "bounded-sim-1",
      messages: [{ role: "user", content: question }],
    });
    expect(answer.object).toBe("chat.completion");
    expect(answer.choices[0]).toMatchObject({
      index: 0,
      finish_reason: "stop",
      message: { role: "assistant", content: "groceries" },
    });
    // Counted as an OpenAI-style provider counts them: the prompt with its chat framing, the answer's text.
    const prompt = countPromptTokens([{ role: "user", content: question }]);
    expect(answer.usage).toEqual({
      prompt_tokens: prompt,
      completion_tokens: countTextTokens("groceries"),
      total_tokens: prompt + countTextTokens("groceries"),
    });
  });

  it("streams the same answer as server-sent events, in several chunks, with the usage last when asked", async () => {
    const stream = await client.chat.completions.create({
      model: "bounded-sim-1",
      messages: [{ role: "user", content: question }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);

    const texts = chunks.flatMap((c) => c.choices.map((choice) => choice.delta.content ?? "")).filter((t) => t !== "");
    expect(texts.length).toBeGreaterThanOrEqual(2);
    expect(texts.join("")).toBe("groceries");
    expect(chunks.flatMap((c) => c.choices.map((choice) => choice.finish_reason)).filter(Boolean)).toEqual(["stop"]);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({
      prompt_tokens: countPromptTokens([{ role: "user", content: question }]),
      completion_tokens: countTextTokens("groceries"),
    });
  });

  it("streams without a usage chunk unless asked", async () => {
    const stream = await client.chat.completions.create({
      model: "bounded-sim-1",
      messages: [{ role: "user", content: question }],
      stream: true,
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((c) => c.choices.length === 1 && !c.usage)).toBe(true);
  });

  it("calls the first tool offered, its arguments built from the last user message", async () => {
    const answer = await client.chat.completions.create({
      model: "bounded-sim-1",
      messages: [{ role: "user", content: "Who is REWE?" }],
      tools: [lookup],
    });
    const choice = answer.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    const call = choice.message.tool_calls![0]!;
    expect(call).toMatchObject({ type: "function", function: { name: "lookup_merchant" } });
    expect(call.type === "function" && JSON.parse(call.function.arguments)).toEqual({ merchant: "Who is REWE?" });
    expect(answer.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it("streams a tool call that the client's stream helper assembles", async () => {
    const stream = client.chat.completions.stream({
      model: "bounded-sim-1",
      messages: [{ role: "user", content: "Who is Lidl?" }],
      tools: [lookup],
    });
    const final = await stream.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0]!;
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    expect(call.type === "function" && JSON.parse(call.function.arguments)).toEqual({ merchant: "Who is Lidl?" });
  });

  it("accepts an assistant message with content null and its tool result, and answers in words", async () => {
    const answer = await client.chat.completions.create({
      model: "bounded-sim-1",
      tools: [lookup],
      messages: [
        { role: "user", content: question },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "lookup_merchant", arguments: '{"merchant":"REWE"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: "REWE is a German supermarket chain." },
      ],
    });
    expect(answer.choices[0]).toMatchObject({ finish_reason: "stop", message: { content: "groceries" } });
  });

  it("refuses a malformed message with a 400 the client reports as such", async () => {
    const error = await client.chat.completions
      .create({ model: "bounded-sim-1", messages: [{ role: "tool", content: "no call id" } as never] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BadRequestError);
  });

  it("lists its model, and retrieves it by id", async () => {
    const models = [];
    for await (const model of client.models.list()) models.push(model);
    expect(models).toEqual([expect.objectContaining({ id: env().MODEL_NAME, object: "model" })]);
    await expect(client.models.retrieve(env().MODEL_NAME)).resolves.toMatchObject({ id: env().MODEL_NAME });
    await expect(client.models.retrieve("no-such-model")).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe("the simulator refuses as OpenAI does, and the official client raises the same errors", () => {
  const apiKey = "sk-simulator-0123456789-right";
  const contextTokens = 400;
  let sim: RunningSimulators;
  const client = (options: { apiKey?: string; baseURL?: string; timeout?: number } = {}) =>
    new OpenAI({
      baseURL: options.baseURL ?? sim.modelBaseUrl,
      apiKey: options.apiKey ?? apiKey,
      maxRetries: 0,
      timeout: options.timeout,
    });
  const ask = (c: OpenAI, body: Partial<Parameters<OpenAI["chat"]["completions"]["create"]>[0]> = {}) =>
    c.chat.completions
      .create({ model: "bounded-sim-1", messages: [{ role: "user", content: question }], ...body, stream: false })
      .catch((e: unknown) => e);

  beforeAll(async () => {
    sim = await simulator({ apiKey, models: ["bounded-sim-1", "bounded-sim-large"], contextTokens });
  });

  it("answers a call with the right key, and serves every model it lists", async () => {
    await expect(ask(client())).resolves.toMatchObject({ object: "chat.completion" });
    await expect(ask(client(), { model: "bounded-sim-large" })).resolves.toMatchObject({ model: "bounded-sim-large" });
    const listed = [];
    for await (const model of client().models.list()) listed.push(model.id);
    expect(listed).toEqual(["bounded-sim-1", "bounded-sim-large"]);
  });

  it("refuses a wrong key with 401 invalid_api_key in OpenAI's body, the key masked", async () => {
    const wrong = "sk-wrong-key-abcdefghijklmnop-WXYZ";
    const error = await ask(client({ apiKey: wrong }));
    expect(error).toBeInstanceOf(AuthenticationError);
    const e = error as AuthenticationError;
    expect(e).toMatchObject({ status: 401, code: "invalid_api_key", type: "invalid_request_error", param: null });
    expect(e.error).toEqual({
      message: `Incorrect API key provided: sk-${"*".repeat(wrong.length - 7)}WXYZ. You can find your API key at https://platform.openai.com/account/api-keys.`,
      type: "invalid_request_error",
      param: null,
      code: "invalid_api_key",
    });
    // The models lookup asks for the key too.
    await expect(client({ apiKey: wrong }).models.retrieve("bounded-sim-1")).rejects.toBeInstanceOf(
      AuthenticationError,
    );
  });

  it("refuses a call without a key with 401 and OpenAI's message for it", async () => {
    const response = await fetch(`${sim.modelBaseUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "bounded-sim-1", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(response.status).toBe(401);
    const body = (await response.json()) as { error: Record<string, unknown> };
    expect(Object.keys(body.error)).toEqual(["message", "type", "param", "code"]);
    expect(body.error).toMatchObject({
      type: "invalid_request_error",
      param: null,
      message: expect.stringMatching(/^You didn't provide an API key\./),
    });
  });

  it("answers a model it does not serve with 404 model_not_found, in chat and in the models lookup", async () => {
    const error = await ask(client(), { model: "gpt-typo" });
    expect(error).toBeInstanceOf(NotFoundError);
    expect(error).toMatchObject({
      status: 404,
      code: "model_not_found",
      error: {
        message: "The model `gpt-typo` does not exist or you do not have access to it.",
        type: "invalid_request_error",
        param: null,
      },
    });
    await expect(client().models.retrieve("gpt-typo")).rejects.toMatchObject({ status: 404, code: "model_not_found" });
  });

  it("answers a path it does not serve (a base URL without /v1) with 404 unknown_url", async () => {
    const error = await ask(client({ baseURL: sim.url }));
    expect(error).toBeInstanceOf(NotFoundError);
    expect(error).toMatchObject({
      status: 404,
      code: "unknown_url",
      error: {
        type: "invalid_request_error",
        message: expect.stringContaining("Unknown request URL: POST /chat/completions."),
      },
    });
  });

  it("answers a request over the context length with 400 context_length_exceeded, counting the completion asked for", async () => {
    const long = await ask(client(), { messages: [{ role: "user", content: "REWE Markt weekly shop ".repeat(200) }] });
    expect(long).toBeInstanceOf(BadRequestError);
    expect(long).toMatchObject({
      status: 400,
      code: "context_length_exceeded",
      param: "messages",
      message: expect.stringMatching(
        /maximum context length is 400 tokens\. However, your messages resulted in \d+ tokens/,
      ),
    });
    // The prompt fits; the prompt and the completion it asks room for do not.
    const roomy = await ask(client(), { max_tokens: contextTokens });
    expect(roomy).toBeInstanceOf(BadRequestError);
    expect(roomy).toMatchObject({
      code: "context_length_exceeded",
      message: expect.stringMatching(
        /However, you requested \d+ tokens \(\d+ in the messages, 400 in the completion\)/,
      ),
    });
    await expect(ask(client(), { max_tokens: 10 })).resolves.toMatchObject({ object: "chat.completion" });
  });

  it("leaves a call unanswered while it is silent: the client's own timeout ends it", async () => {
    sim.faults.setSilent("model", true);
    try {
      const started = performance.now();
      const error = await ask(client({ timeout: 300 }));
      expect(error).toBeInstanceOf(APIConnectionTimeoutError);
      expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    } finally {
      sim.faults.setSilent("model", false);
    }
    await expect(ask(client())).resolves.toMatchObject({ object: "chat.completion" });
  });
});

describe("a 429 of the simulator through chatCompletion and the provider limit", () => {
  // 1 call in flight at most; the simulator asks a caller refused for it to wait 1 production s.
  const timeScale = 0.05;
  const retryAfterMs = scaled(1_000, timeScale);
  const queue = `sim-openai-${randomUUID()}`;
  let sim: RunningSimulators;
  let latencyMs = 1_000;

  /**
   * Holds the simulator's only slot with a minute-long call of another client, as another user of
   * the provider would, until `release()`.
   */
  async function holdTheSlot() {
    // The previous test's call is gone once the simulator saw its connection close.
    await vi.waitFor(() => expect(sim.model.inFlight()).toBe(0));
    const controller = new AbortController();
    latencyMs = 60_000;
    const other = openai(sim)
      .chat.completions.create(
        { model: "bounded-sim-1", messages: [{ role: "user", content: "hold" }] },
        { signal: controller.signal },
      )
      .catch(() => undefined);
    await vi.waitFor(() => expect(sim.model.inFlight()).toBe(1));
    latencyMs = 1_000;
    return { release: () => controller.abort(), done: other };
  }

  beforeAll(async () => {
    sim = await simulator({ timeScale, latencyMs: () => latencyMs, limits: { concurrency: 1 } });
  });

  it("ends the call with the server's Retry-After when it is longer than the call may wait, for the caller to reschedule", async () => {
    const other = await holdTheSlot();
    const records: ModelCallRecord[] = [];
    const error = await chatCompletion({
      messages: [{ role: "user", content: "hi" }],
      signal: new AbortController().signal,
      context: { queue, jobKind: "throttled" },
      baseUrl: sim.modelBaseUrl,
      timeScale,
      maxRetryAfterMs: retryAfterMs - 1,
      record: async (r) => void records.push(r),
    }).catch((e: unknown) => e);
    other.release();
    await other.done;

    expect(error).toBeInstanceOf(ModelCallError);
    expect(error).toMatchObject({ status: 429, retryable: true, attempts: 1, retryAfterMs });
    expect(records).toEqual([
      expect.objectContaining({
        outcome: "error",
        error: expect.stringMatching(/^HTTP 429: Rate limit reached for model/),
      }),
    ]);
  });

  it("waits the server's Retry-After before the next attempt when it may", async () => {
    const other = await holdTheSlot();
    const records: ModelCallRecord[] = [];
    const result = await chatCompletion({
      messages: [{ role: "user", content: "hi" }],
      signal: new AbortController().signal,
      context: { queue, jobKind: "throttled" },
      baseUrl: sim.modelBaseUrl,
      timeScale,
      maxRetries: 5,
      maxRetryAfterMs: 10 * retryAfterMs,
      record: async (r) => {
        records.push(r);
        // The other call ends once this one was refused: the retry finds the slot free.
        other.release();
      },
    });
    await other.done;

    expect(result.attempts).toBeGreaterThanOrEqual(2);
    expect(records[0]).toMatchObject({ outcome: "error", error: expect.stringMatching(/^HTTP 429/) });
    expect(records.at(-1)).toMatchObject({ outcome: "ok" });
    // The next attempt started no sooner than the server asked (start times are whole ms).
    const refusedEnd = records[0]!.startedAt.getTime() + records[0]!.durationMs;
    expect(records[1]!.startedAt.getTime()).toBeGreaterThanOrEqual(Math.floor(refusedEnd + retryAfterMs) - 2);
  });
});
