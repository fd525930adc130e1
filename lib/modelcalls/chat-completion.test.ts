import { describe, expect, it, vi } from "vitest";
import { waitFor } from "@/test/helpers/wait";
import type { OutboundResponse } from "@/lib/http/outbound";
import { chatCompletion, type ChatCompletionOptions, type HttpPost } from "./chat-completion";
import { ModelCallError } from "./errors";
import type { ModelCallRecord } from "./record";

/** A control signal of the kind jobs abort with; callers recognise it by class. */
class DeadlineProbe extends Error {
  override name = "DeadlineProbe";
}

function response(status: number, body: unknown, headers: Record<string, string> = {}): OutboundResponse {
  return {
    status,
    header: (name) => headers[name.toLowerCase()],
    body: typeof body === "string" ? body : JSON.stringify(body),
  };
}

const ok = (content: string) => response(200, { choices: [{ message: { role: "assistant", content } }] });
const serverError = () => response(500, { error: { message: "overloaded", type: "server_error" } });

/** A transport answering from a script, one entry per attempt (a thrown Error is a network error). */
function scripted(...answers: (OutboundResponse | Error)[]): HttpPost & { calls: number } {
  const post = Object.assign(
    async () => {
      post.calls++;
      const next = answers.shift();
      if (!next) throw new Error("script ran out");
      if (next instanceof Error) throw next;
      return next;
    },
    { calls: 0 },
  );
  return post;
}

function call(post: HttpPost, overrides: Partial<ChatCompletionOptions> = {}) {
  const records: ModelCallRecord[] = [];
  const promise = chatCompletion({
    messages: [{ role: "user", content: "hi" }],
    model: "test-model",
    signal: new AbortController().signal,
    context: { queue: "imports", jobKind: "csv_import" },
    baseUrl: "http://model.invalid",
    timeScale: 0.001,
    record: async (r) => void records.push(r),
    post,
    ...overrides,
  });
  return { promise, records };
}

describe("chatCompletion", () => {
  it("returns the first choice's content and records one ok attempt", async () => {
    const { promise, records } = call(scripted(ok("groceries")));
    await expect(promise).resolves.toMatchObject({ content: "groceries", attempts: 1 });
    expect(records).toEqual([
      expect.objectContaining({ outcome: "ok", model: "test-model", queue: "imports", jobKind: "csv_import" }),
    ]);
  });

  it("posts to {baseUrl}/v1/chat/completions, keeping a path prefix, with the API key", async () => {
    const post = vi.fn<HttpPost>(async () => ok("x"));
    await call(post, { baseUrl: "https://models.example/openai/", apiKey: "sk-test" }).promise;
    const [url, body, headers] = post.mock.calls[0]!;
    expect(url.toString()).toBe("https://models.example/openai/v1/chat/completions");
    expect(JSON.parse(body)).toMatchObject({ model: "test-model", messages: [{ role: "user", content: "hi" }] });
    expect(headers.authorization).toBe("Bearer sk-test");
  });

  it("retries 5xx and network errors, recording every attempt", async () => {
    const post = scripted(serverError(), new TypeError("fetch failed"), ok("transport"));
    const { promise, records } = call(post);
    await expect(promise).resolves.toMatchObject({ content: "transport", attempts: 3 });
    expect(records.map((r) => r.outcome)).toEqual(["error", "error", "ok"]);
    expect(records[0]!.error).toBe("HTTP 500: overloaded");
    expect(records[1]!.error).toMatch(/network error: TypeError: fetch failed/);
  });

  it("gives up after maxRetries with a ModelCallError carrying the status", async () => {
    const post = scripted(serverError(), serverError(), serverError(), ok("never"));
    const { promise, records } = call(post, { maxRetries: 2 });
    const error = await promise.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error).toMatchObject({ status: 500, attempts: 3, retryable: true });
    expect(post.calls).toBe(3);
    expect(records.map((r) => r.outcome)).toEqual(["error", "error", "error"]);
  });

  it("does not retry a 4xx other than 408/429", async () => {
    const post = scripted(response(400, { error: { message: "bad model" } }), ok("never"));
    await expect(call(post).promise).rejects.toMatchObject({ name: "ModelCallError", status: 400, attempts: 1, retryable: false });
  });

  it("does not retry an answer without content", async () => {
    const post = scripted(response(200, { choices: [] }), ok("never"));
    await expect(call(post).promise).rejects.toMatchObject({ status: 200, attempts: 1 });
  });

  it("waits the Retry-After of a 429 before trying again", async () => {
    const post = scripted(response(429, { error: { message: "slow down" } }, { "retry-after-ms": "60" }), ok("salary"));
    const started = performance.now();
    await expect(call(post, { maxRetryAfterMs: 1_000 }).promise).resolves.toMatchObject({ content: "salary", attempts: 2 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(55);
  });

  it("does not hold the slot for a Retry-After longer than maxRetryAfterMs", async () => {
    const post = scripted(response(429, { error: { message: "slow down" } }, { "retry-after": "30" }), ok("never"));
    const error = await call(post, { maxRetryAfterMs: 5_000 }).promise.catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "ModelCallError", status: 429, retryable: true, retryAfterMs: 30_000, attempts: 1 });
  });

  it("rejects with the abort reason itself when aborted mid-call, recorded as aborted", async () => {
    const controller = new AbortController();
    const reason = new DeadlineProbe("soft limit reached");
    let inFlight = false;
    const post: HttpPost = (_url, _body, _headers, signal) =>
      new Promise((_resolve, reject) => {
        inFlight = true;
        signal.addEventListener("abort", () => reject(new Error("socket destroyed")));
      });
    const { promise, records } = call(post, { signal: controller.signal });
    await waitFor(() => inFlight, { timeoutMs: 5_000, what: "the request to be in flight" });
    controller.abort(reason);
    await expect(promise).rejects.toBe(reason);
    expect(records).toEqual([expect.objectContaining({ outcome: "aborted", error: "DeadlineProbe: soft limit reached" })]);
  });

  it("does not retry once the signal aborted during the backoff", async () => {
    const controller = new AbortController();
    const reason = new DeadlineProbe("deadline");
    const post = scripted(serverError(), ok("never"));
    const { promise, records } = call(post, { signal: controller.signal, timeScale: 1 });
    // The failed attempt is recorded just before the backoff (250–500 ms at this scale) begins.
    await waitFor(() => records.length === 1, { timeoutMs: 5_000, what: "the first attempt to fail" });
    controller.abort(reason);
    await expect(promise).rejects.toBe(reason);
    expect(post.calls).toBe(1);
    expect(records.map((r) => r.outcome)).toEqual(["error"]);
  });

  it("makes no attempt when the signal has already aborted", async () => {
    const reason = new DeadlineProbe("already");
    const post = scripted(ok("never"));
    const { promise, records } = call(post, { signal: AbortSignal.abort(reason) });
    await expect(promise).rejects.toBe(reason);
    expect(post.calls).toBe(0);
    expect(records).toEqual([]);
  });

  it("keeps the answer when recording fails", async () => {
    const { promise } = call(scripted(ok("rent")), { record: () => Promise.reject(new Error("database down")) });
    await expect(promise).resolves.toMatchObject({ content: "rent" });
  });
});
