import { afterAll, beforeEach, describe, expect, it, vi } from "vitest";
import { DeadlineExceeded, JobCancelled } from "@/lib/core/signals";
import { breakerKey } from "@/lib/ratelimit/breaker";
import { providerWaitersKey } from "@/lib/ratelimit/provider";
import { providerTokensKey } from "@/lib/ratelimit/provider-tokens";
import { closeRedis, redis } from "@/lib/redis/client";
import { waitFor } from "@/test/helpers/wait";
import { chatCompletion, type ChatCompletionOptions, type ModelFetch } from "./chat-completion";
import { ModelCallError } from "./errors";
import type { ModelCallRecord } from "./record";

/** A control signal of the kind jobs abort with; callers recognise it by class. */
class DeadlineProbe extends Error {
  override name = "DeadlineProbe";
}

/** What the endpoint answers, built afresh for each attempt (a Response's body is read once). */
type Answer = () => Response;

function response(status: number, body: unknown, headers: Record<string, string> = {}): Answer {
  return () =>
    new Response(typeof body === "string" ? body : JSON.stringify(body), {
      status,
      headers: { "content-type": "application/json", ...headers },
    });
}

const usage = { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 };
const ok = (content: string) => response(200, { choices: [{ message: { role: "assistant", content } }], usage });
const serverError = () => response(500, { error: { message: "overloaded", type: "server_error" } });

/** A transport answering from a script, one entry per attempt (a thrown Error is a network error). */
function scripted(...answers: (Answer | Error)[]): ModelFetch & { calls: number } {
  const fetch = Object.assign(
    async () => {
      fetch.calls++;
      const next = answers.shift();
      if (!next) throw new Error("script ran out");
      if (next instanceof Error) throw next;
      return next();
    },
    { calls: 0 },
  );
  return fetch;
}

function call(fetch: ModelFetch, overrides: Partial<ChatCompletionOptions> = {}) {
  const records: ModelCallRecord[] = [];
  const promise = chatCompletion({
    messages: [{ role: "user", content: "hi" }],
    model: "test-model",
    signal: new AbortController().signal,
    context: { queue: "imports", jobKind: "csv_import" },
    baseUrl: "http://model.invalid/v1",
    timeScale: 0.001,
    record: async (r) => void records.push(r),
    fetch,
    ...overrides,
  });
  return { promise, records };
}

// The model's circuit breaker (in Redis) would carry one test's failures into the next, and its
// token budgets a 429's pause (shared by every process, so by the next test too).
beforeEach(async () => {
  await redis().del(breakerKey("model"), providerTokensKey("model"));
});

afterAll(async () => {
  await redis().del(providerTokensKey("model"));
  await closeRedis();
});

describe("chatCompletion", () => {
  it("returns the first choice's content and its usage, and records one ok attempt with the tokens", async () => {
    const { promise, records } = call(scripted(ok("groceries")));
    await expect(promise).resolves.toMatchObject({
      content: "groceries",
      attempts: 1,
      usage: { promptTokens: 12, completionTokens: 3 },
    });
    expect(records).toEqual([
      expect.objectContaining({
        outcome: "ok",
        model: "test-model",
        queue: "imports",
        jobKind: "csv_import",
        promptTokens: 12,
        completionTokens: 3,
      }),
    ]);
  });

  it("records no tokens when the answer has no usage", async () => {
    const { promise, records } = call(
      scripted(response(200, { choices: [{ message: { role: "assistant", content: "rent" } }] })),
    );
    await expect(promise).resolves.toMatchObject({ usage: { promptTokens: undefined, completionTokens: undefined } });
    expect(records[0]).toMatchObject({ promptTokens: undefined, completionTokens: undefined });
  });

  it("posts to {baseUrl}/chat/completions, the base URL's /v1 and path prefix kept and never doubled, with the API key", async () => {
    const fetch = vi.fn<ModelFetch>(async () => ok("x")());
    await call(fetch, { baseUrl: "https://models.example/openai/v1/", apiKey: "sk-test" }).promise;
    const [url, init] = fetch.mock.calls[0]!;
    expect(url.toString()).toBe("https://models.example/openai/v1/chat/completions");
    expect(JSON.parse(init!.body as string)).toMatchObject({
      model: "test-model",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(new Headers(init!.headers).get("authorization")).toBe("Bearer sk-test");
  });

  it("sends no Authorization header without an API key", async () => {
    const fetch = vi.fn<ModelFetch>(async () => ok("x")());
    await call(fetch, { apiKey: undefined }).promise;
    expect(new Headers(fetch.mock.calls[0]![1]!.headers).has("authorization")).toBe(false);
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
    // Two failures: a third in a row would open the circuit breaker, which ends the call otherwise.
    const post = scripted(serverError(), serverError(), ok("never"));
    const { promise, records } = call(post, { maxRetries: 1 });
    const error = await promise.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error).toMatchObject({ status: 500, attempts: 2, retryable: true });
    expect(post.calls).toBe(2);
    expect(records.map((r) => r.outcome)).toEqual(["error", "error"]);
  });

  it("a 401 is the model service misconfigured: the call ends as its outage, the breaker's reason names the URL without the credentials or query in it, and never the key", async () => {
    const post = scripted(
      response(401, {
        error: {
          message: "Incorrect API key provided: sk-wrong-123456.",
          type: "invalid_request_error",
          code: "invalid_api_key",
        },
      }),
    );
    const error = await call(post, {
      baseUrl: "https://user:hunter2@models.example/v1?token=secret-query",
      apiKey: "sk-wrong-123456",
    }).promise.catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "OutsideServiceDown", service: "model" });
    const reason = (await redis().hget(breakerKey("model"), "error"))!;
    expect(reason).toContain("POST https://models.example/v1/chat/completions, model test-model");
    for (const secret of ["hunter2", "user:", "secret-query", "sk-wrong-123456"]) expect(reason).not.toContain(secret);
  });

  it("does not retry a 4xx other than 408/429", async () => {
    const post = scripted(response(400, { error: { message: "bad model" } }), ok("never"));
    await expect(call(post).promise).rejects.toMatchObject({
      name: "ModelCallError",
      status: 400,
      attempts: 1,
      retryable: false,
    });
  });

  it("does not retry an answer without content", async () => {
    const post = scripted(response(200, { choices: [] }), ok("never"));
    await expect(call(post).promise).rejects.toMatchObject({ status: 200, attempts: 1 });
  });

  it("retries an attempt that outran attemptTimeoutMs, as a network error", async () => {
    // The first attempt hangs until its signal aborts, as a server that does not answer.
    let calls = 0;
    const fetch: ModelFetch = (_url, init) => {
      calls++;
      if (calls > 1) return Promise.resolve(ok("late")());
      return new Promise((_resolve, reject) =>
        init!.signal!.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))),
      );
    };
    // The shortest attempt timeout is 2 s of real time, whatever the scale.
    const { promise, records } = call(fetch, { attemptTimeoutMs: 1 });
    await expect(promise).resolves.toMatchObject({ content: "late", attempts: 2 });
    expect(records[0]).toMatchObject({
      outcome: "error",
      error: expect.stringMatching(/^network error: no answer within 2000 ms/),
    });
  });

  it("waits the Retry-After of a 429 before trying again", async () => {
    const post = scripted(response(429, { error: { message: "slow down" } }, { "retry-after-ms": "60" }), ok("salary"));
    const started = performance.now();
    await expect(call(post, { maxRetryAfterMs: 1_000 }).promise).resolves.toMatchObject({
      content: "salary",
      attempts: 2,
    });
    expect(performance.now() - started).toBeGreaterThanOrEqual(55);
  });

  it("does not hold the slot for a Retry-After longer than maxRetryAfterMs", async () => {
    const post = scripted(response(429, { error: { message: "slow down" } }, { "retry-after": "30" }), ok("never"));
    const error = await call(post, { maxRetryAfterMs: 5_000 }).promise.catch((e: unknown) => e);
    expect(error).toMatchObject({
      name: "ModelCallError",
      status: 429,
      retryable: true,
      retryAfterMs: 30_000,
      attempts: 1,
    });
  });

  /** A call whose request hangs until the signal aborts with `reason`: what it recorded. */
  const cutMidCall = async (reason: Error) => {
    const controller = new AbortController();
    let inFlight = false;
    const post: ModelFetch = (_url, init) =>
      new Promise((_resolve, reject) => {
        inFlight = true;
        init!.signal!.addEventListener("abort", () => reject(new Error("socket destroyed")));
      });
    const { promise, records } = call(post, { signal: controller.signal });
    await waitFor(() => inFlight, { timeoutMs: 5_000, what: "the request to be in flight" });
    controller.abort(reason);
    await expect(promise).rejects.toBe(reason);
    return records;
  };

  it("rejects with the abort reason itself when aborted mid-call, recorded as aborted", async () => {
    expect(await cutMidCall(new DeadlineProbe("soft limit reached"))).toEqual([
      expect.objectContaining({ outcome: "aborted", error: "DeadlineProbe: soft limit reached" }),
    ]);
  });

  it("says whether the call was cut by its job's deadline, not by a cancel or anything else", async () => {
    const cutBy = async (reason: Error) => (await cutMidCall(reason)).map((r) => [r.outcome, r.cutByDeadline]);
    expect(await cutBy(new DeadlineExceeded("job-1", 60_000))).toEqual([["aborted", true]]);
    expect(await cutBy(new JobCancelled("job-1", "an operator"))).toEqual([["aborted", false]]);
    expect(await cutBy(new DeadlineProbe("not the deadline"))).toEqual([["aborted", false]]);
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

describe("chatCompletion with hedgeAfterMs", () => {
  /** A request the server holds until the client cancels it, as a call in the provider's far tail. */
  const unanswered = (init: RequestInit | undefined) =>
    new Promise<Response>((_resolve, reject) =>
      init!.signal!.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))),
    );

  it("sends the same request again in a spare slot once the first has gone unanswered that long: the second's answer is the attempt's, the first is cancelled and recorded as superseded, not as a failure", async () => {
    const sent: AbortSignal[] = [];
    const fetch: ModelFetch = (_url, init) => {
      sent.push(init!.signal!);
      return sent.length === 1 ? unanswered(init) : Promise.resolve(ok("hedged")());
    };
    // The shortest delay is 3 s of real time, whatever the scale.
    const { promise, records } = call(fetch, { hedgeAfterMs: 1 });
    await expect(promise).resolves.toMatchObject({ content: "hedged", attempts: 1 });
    expect(sent).toHaveLength(2);
    expect(sent[0]!.aborted).toBe(true);
    await waitFor(() => records.length === 2, { what: "both requests to be recorded", timeoutMs: 5_000 });
    expect(records.map((r) => [r.outcome, r.error ?? null]).sort()).toEqual([
      ["ok", null],
      ["superseded", "cancelled: the same request sent again answered first"],
    ]);
  }, 15_000);

  it("records both requests of a hedge as aborted when the job ends while both are out", async () => {
    const controller = new AbortController();
    const reason = new DeadlineProbe("soft limit reached");
    let sent = 0;
    const fetch: ModelFetch = (_url, init) => {
      sent++;
      return unanswered(init);
    };
    const { promise, records } = call(fetch, { hedgeAfterMs: 1, signal: controller.signal });
    await waitFor(() => sent === 2, { what: "the request to be sent again", timeoutMs: 10_000 });
    controller.abort(reason);
    await expect(promise).rejects.toBe(reason);
    await waitFor(() => records.length === 2, { what: "both requests to be recorded", timeoutMs: 5_000 });
    expect(records.map((r) => [r.outcome, r.error]).sort()).toEqual([
      ["aborted", "DeadlineProbe: soft limit reached"],
      ["aborted", "aborted: DeadlineProbe: soft limit reached"],
    ]);
  }, 20_000);

  it("sends nothing twice while a call waits for a provider slot: the first request's answer is awaited", async () => {
    const [sec] = await redis().time();
    await redis().zadd(providerWaitersKey("model"), Number(sec) * 1000 + 60_000, "another-tenant");
    try {
      let calls = 0;
      const fetch: ModelFetch = async () => {
        calls++;
        await new Promise((resolve) => setTimeout(resolve, 4_000));
        return ok("slow")();
      };
      const { promise, records } = call(fetch, { hedgeAfterMs: 1 });
      await expect(promise).resolves.toMatchObject({ content: "slow", attempts: 1 });
      expect(calls).toBe(1);
      await waitFor(() => records.length === 1, { what: "the request to be recorded", timeoutMs: 5_000 });
      expect(records[0]).toMatchObject({ outcome: "ok" });
    } finally {
      await redis().zrem(providerWaitersKey("model"), "another-tenant");
    }
  }, 15_000);
});
