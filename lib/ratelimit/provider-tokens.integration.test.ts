import { spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { chatCompletion } from "@/lib/modelcalls/chat-completion";
import { countPromptTokens } from "@/lib/modelcalls/tokens";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { waitFor } from "@/test/helpers/wait";
import { breakerKey } from "./breaker";
import { runWithRateLimitDeferral } from "./context";
import { createProviderLimiter, providerLimiter } from "./provider";
import {
  createProviderTokens,
  DEFAULT_COMPLETION_ESTIMATE,
  MAX_PROBES,
  providerTokensKey,
  tokenUrgentKeys,
  type ProviderTokens,
  type TokenReservation,
} from "./provider-tokens";
import { createModelSimulator } from "@/workers/simulators/model";
import { createRouter } from "@/workers/simulators/router";

const connection = createRedis("producer", { enableOfflineQueue: true });
const root = path.resolve(import.meta.dirname, "../..");
/** A deferral threshold longer than any wait these tests make, so a slow machine makes a call wait, never give up. */
const JOB_LIKE_WAIT_MS = 20_000;

beforeEach(async () => {
  await connection.del(providerTokensKey("model"), ...tokenUrgentKeys("model"), breakerKey("model"));
});

afterAll(async () => {
  await connection.del(providerTokensKey("model"), ...tokenUrgentKeys("model"), breakerKey("model"));
  await connection.quit();
  await closeRedis();
});

/** A server on a free port that counts the calls it is answering at once, in front of `handler`. */
async function serve(handler: http.RequestListener) {
  let now = 0;
  let max = 0;
  let calls = 0;
  const server = http.createServer((req, res) => {
    now++;
    calls++;
    max = Math.max(max, now);
    res.once("close", () => now--);
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    stats: () => ({ max, calls }),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A limiter of 4 calls in flight over `tokens`, asking every 5 ms, at `timeScale`. */
function limiterOver(tokens: ProviderTokens, timeScale: number, rps = 1_000) {
  return createProviderLimiter({
    redis: connection,
    timeScale,
    pollMs: 5,
    limits: { model: { concurrency: 4, rps } },
    tokens,
  });
}

describe("the provider's tokens per minute (real Redis)", () => {
  it("a call reserves its prompt and an estimate of its answer before it is sent, and settles with the answer's usage after", async () => {
    // Time scale 1,000,000: a minute is 694 real days, so not one token refills while the test runs, however slow the machine.
    const tokens = createProviderTokens({
      redis: connection,
      timeScale: 1_000_000,
      limits: { model: { tokens: 100_000 } },
    });
    const limiter = limiterOver(tokens, 1_000_000);
    const available = async () => (await tokens.peek("model")).budgets.find((b) => b.budget === "tokens")!;

    let during = 0;
    await limiter.withSlot(
      "model",
      async (call) => {
        during = (await available()).available;
        await call.observe({ status: 200, usage: { input: 700, output: 40 } });
      },
      { tokens: { input: 700, shape: "test:8" } },
    );
    // Before any answer of this shape: the prompt and the default estimate of an answer.
    expect(100_000 - during).toBeCloseTo(700 + DEFAULT_COMPLETION_ESTIMATE, 0);
    expect((await available()).available).toBeCloseTo(100_000 - 740, 0);
    expect(await available()).toMatchObject({ limit: 100_000, source: "configured" });

    // The next call of the shape is estimated from the answers so far (40, and a quarter over it).
    await limiter.withSlot(
      "model",
      async (call) => {
        during = (await available()).available;
        await call.observe({ status: 200, usage: { input: 700, output: 40 } });
      },
      { tokens: { input: 700, shape: "test:8" } },
    );
    expect(100_000 - 740 - during).toBeCloseTo(700 + 50, 0);

    // A call that ends without an answer keeps its prompt counted and gives the answer's estimate back.
    await limiter.withSlot("model", async () => "no answer", { tokens: { input: 300, shape: "test:8" } });
    expect((await available()).available).toBeCloseTo(100_000 - 2 * 740 - 300, 0);

    // Calls refused with a 429 used nothing: every token comes back, and they do not teach the
    // estimate that answers are short (the next call still reserves 40 and a quarter over it).
    for (let i = 0; i < 5; i++) {
      await limiter.withSlot("model", async (call) => call.observe({ status: 429, usage: undefined }), {
        tokens: { input: 700, shape: "test:8" },
      });
    }
    expect((await available()).available).toBeCloseTo(100_000 - 2 * 740 - 300, 0);
    await limiter.withSlot(
      "model",
      async (call) => {
        during = (await available()).available;
        await call.observe({ status: 200, usage: { input: 700, output: 40 } });
      },
      { tokens: { input: 700, shape: "test:8" } },
    );
    expect(100_000 - 2 * 740 - 300 - during).toBeCloseTo(700 + 50, 0);
  });

  it("a provider that limits input and output apart (Anthropic) has each budget charged with its own part: the prompt from input, the answer from output", async () => {
    const tokens = createProviderTokens({ redis: connection, timeScale: 1000 });
    const limiter = limiterOver(tokens, 1000);
    // Learnt from Anthropic's headers, nothing configured.
    await tokens.learn(
      "model",
      {
        tokens: {
          input: { limit: 40_000, remaining: 40_000, resetMs: 0 },
          output: { limit: 8_000, remaining: 8_000, resetMs: 0 },
        },
      },
      true,
    );
    await limiter.withSlot("model", (call) => call.observe({ status: 200, usage: { input: 1_000, output: 7_600 } }), {
      tokens: { input: 1_000, maxOutput: 8_000, shape: "anthropic" },
    });
    const budgets = Object.fromEntries((await tokens.peek("model")).budgets.map((b) => [b.budget, b]));
    expect(Object.keys(budgets).sort()).toEqual(["input", "output"]);
    expect(budgets.input).toMatchObject({ limit: 40_000, source: "headers" });
    expect(budgets.input!.available).toBeCloseTo(39_000, 0);
    expect(budgets.output!.available).toBeCloseTo(400, 0);
    // The next call of the shape expects a long answer again (up to its max tokens, 500): more than
    // the 400 output tokens left, so it waits for output tokens, however much input is left.
    const deferred = await runWithRateLimitDeferral(5, () =>
      limiter
        .withSlot("model", async () => "sent", { tokens: { input: 10, maxOutput: 500, shape: "anthropic" } })
        .catch((err: unknown) => err),
    );
    expect(deferred).toMatchObject({ name: "RateLimitDefer" });
  });

  it("a call that would take more tokens than are left waits for them, and gives the worker slot back when that wait is long", async () => {
    // A minute is 600 ms at time scale 0.01: 6,000 tokens come back every 600 real ms.
    const tokens = createProviderTokens({ redis: connection, timeScale: 0.01, limits: { model: { tokens: 6_000 } } });
    const limiter = limiterOver(tokens, 0.01, 100_000);
    await limiter.withSlot("model", (call) => call.observe({ status: 200, usage: { input: 5_000, output: 900 } }), {
      tokens: { input: 5_000, shape: "big" },
    });
    const started = performance.now();
    await limiter.withSlot("model", (call) => call.observe({ status: 200, usage: { input: 5_000, output: 900 } }), {
      tokens: { input: 5_000, shape: "big" },
    });
    // ≈ 5,000 + 1,125 tokens needed of the ~100 left: most of a 600 ms minute (less what came back
    // while the first call was settled, on a busy machine).
    expect(performance.now() - started).toBeGreaterThanOrEqual(300);

    // Inside a job whose deferral threshold is shorter than the wait, the call is deferred, not slept.
    const deferred = await runWithRateLimitDeferral(5, () =>
      limiter
        .withSlot("model", async () => "sent", { tokens: { input: 5_900, shape: "big" } })
        .catch((err: unknown) => err),
    );
    expect(deferred).toMatchObject({ name: "RateLimitDefer", scope: "provider:model" });
  });

  it("with nothing configured, the limit the answers' headers announce (limit, remaining, reset) is learnt and kept in Redis for every process", async () => {
    // The simulator in production time: what it announces stays as it was when the answer left.
    const sim = createModelSimulator({
      errorRate: 0,
      timeScale: 1,
      latencyMs: () => 5,
      limits: { concurrency: 100, rps: 100_000, tpm: 1_000_000 },
    });
    const server = await serve(createRouter(sim.routes));
    try {
      const messages = [{ role: "user" as const, content: "Transaction:\nREWE Markt, weekly shop" }];
      // As a job makes them (a deferral context): the calls past MAX_PROBES wait for the probes'
      // answers however long a loaded machine takes, instead of meeting the short cap of a call
      // made outside any job.
      const results = await Promise.all(
        Array.from({ length: 6 }, () =>
          runWithRateLimitDeferral(JOB_LIKE_WAIT_MS, () =>
            chatCompletion({
              messages,
              signal: new AbortController().signal,
              context: { jobKind: "csv_import" },
              baseUrl: server.baseUrl,
              maxRetries: 0,
              record: async () => {},
            }),
          ),
        ),
      );
      expect(results.every((r) => r.attempts === 1)).toBe(true);
      expect(server.stats().calls).toBe(6);
      const state = await providerLimiter().peek("model");
      expect(state.tokenLimits.budgets).toHaveLength(1);
      const learnt = state.tokenLimits.budgets[0]!;
      expect(learnt).toMatchObject({ budget: "tokens", limit: 1_000_000, source: "headers" });
      expect(learnt.announced!.limit).toBe(1_000_000);
      expect(learnt.announced!.remaining).toBeLessThan(1_000_000);
      expect(learnt.announced!.remaining).toBeGreaterThan(1_000_000 - 6 * (countPromptTokens(messages) + 10));
      // Whole again after the tokens used (or at once, when they have come back by the last answer).
      expect(Date.parse(learnt.announced!.resetAt)).toBeGreaterThanOrEqual(Date.parse(learnt.announced!.at));
    } finally {
      await server.close();
    }
  });

  it("while no limit is known, only MAX_PROBES calls ask the provider at once; the next waits for their answers", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const sim = createRouter(
      createModelSimulator({
        errorRate: 0,
        timeScale: 0.001,
        latencyMs: () => 1,
        limits: { concurrency: 100, rps: 100_000, tpm: 1_000_000 },
      }).routes,
    );
    let answered = 0;
    const server = await serve((req, res) => {
      // The first MAX_PROBES calls are held until released: nothing is known meanwhile.
      if (answered++ < MAX_PROBES) void held.then(() => sim(req, res));
      else sim(req, res);
    });
    try {
      // In a deferral context, as a job asks: the waiting call waits however long the release takes.
      const ask = () =>
        runWithRateLimitDeferral(JOB_LIKE_WAIT_MS, () =>
          chatCompletion({
            messages: [{ role: "user", content: "hi" }],
            signal: new AbortController().signal,
            context: {},
            baseUrl: server.baseUrl,
            maxRetries: 0,
            record: async () => {},
          }),
        );
      const probes = Array.from({ length: MAX_PROBES }, ask);
      await waitFor(() => server.stats().calls === MAX_PROBES, {
        timeoutMs: 10_000,
        what: "the probes to reach the provider",
      });
      const next = ask();
      // An absence, so a clock: a call that did not wait for the probes would have reached the server by now.
      await new Promise((r) => setTimeout(r, 100));
      expect(server.stats().calls).toBe(MAX_PROBES);
      release();
      await Promise.all([...probes, next]);
      expect(server.stats().calls).toBe(MAX_PROBES + 1);
    } finally {
      await server.close();
    }
  });

  it("a 429 with Retry-After pauses the provider for every process: another process's call is not sent until the wait is over", async () => {
    const PAUSE_MS = 1_500;
    let refusedAt = 0;
    let hitAfter: number[] = [];
    const sim = createRouter(
      createModelSimulator({
        errorRate: 0,
        timeScale: 1,
        latencyMs: () => 1,
        limits: { concurrency: 100, rps: 100_000, tpm: 1_000_000 },
      }).routes,
    );
    const server = await serve((req, res) => {
      if (refusedAt === 0) {
        refusedAt = Date.now();
        res.writeHead(429, {
          "content-type": "application/json",
          "retry-after-ms": String(PAUSE_MS),
          "retry-after": "2",
        });
        res.end(
          JSON.stringify({
            error: { message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded" },
          }),
        );
        return;
      }
      hitAfter.push(Date.now() - refusedAt);
      sim(req, res);
    });
    const prefix = process.env.BOUNDED_REDIS_PREFIX!;
    // Loaded before the 429, so its start-up is not what the test times.
    const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/provider-tokens-call.ts"], {
      cwd: root,
      env: {
        ...process.env,
        BOUNDED_REDIS_PREFIX: prefix,
        BOUNDED_TIME_SCALE: "1",
        TARGET_BASE_URL: server.baseUrl,
        LOG_LEVEL: "warn",
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    await waitFor(() => out.includes("ready"), { timeoutMs: 20_000, what: "the other process to be ready" });
    try {
      // This process meets the 429 (its own retry is left out: another process is what is watched).
      const first = await chatCompletion({
        messages: [{ role: "user", content: "hi" }],
        signal: new AbortController().signal,
        context: {},
        baseUrl: server.baseUrl,
        maxRetries: 0,
        record: async () => {},
      }).catch((err: unknown) => err);
      expect(first).toMatchObject({ name: "ModelCallError", status: 429 });
      const paused = await providerLimiter().peek("model");
      expect(paused.tokenLimits.pausedUntil).not.toBeNull();
      // Another process, same Redis and prefix, starts a call right away.
      child.stdin.write("go\n");
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
      expect(code, err).toBe(0);
      const report = JSON.parse(out.trim().split("\n").at(-1)!) as { startedAt: number; attempts: number };
      expect(report.attempts).toBe(1);
      // The child began inside the pause, and its call reached the provider only after it.
      expect(report.startedAt - refusedAt).toBeLessThan(PAUSE_MS);
      expect(hitAfter).toHaveLength(1);
      expect(hitAfter[0]).toBeGreaterThanOrEqual(PAUSE_MS - 5);
    } finally {
      hitAfter = [];
      await server.close();
    }
  }, 30_000);
});

describe("provider tokens: the call with the least time left goes first (real Redis)", () => {
  // Time scale 1,000,000: no token refills while the test runs; only what is given back returns.
  const tokens = createProviderTokens({
    redis: connection,
    timeScale: 1_000_000,
    limits: { model: { tokens: 1_000 } },
  });
  /** A request that needs `n` tokens: its prompt and an answer of at most one token. */
  const needing = (n: number) => ({ input: n - 1, maxOutput: 1, shape: "deadline-test" });
  const asks = (id: string, n: number, urgentDeadlineAt?: number, ttlMs = 60_000) =>
    tokens.reserve("model", needing(n), { id, urgentDeadlineAt, ttlMs });
  const reason = (r: Awaited<ReturnType<typeof asks>>) => (r.ok ? "reserved" : r.reason);

  it("while an urgent call waits for tokens, no call with a later deadline or none takes them; an earlier deadline does", async () => {
    const deadline = Date.now() + 60_000;
    const big = await asks("big", 900);
    expect(reason(big)).toBe("reserved");
    // 100 tokens left: the urgent call needs 500 and waits for them.
    expect(reason(await asks("urgent", 500, deadline))).toBe("tokens");
    // 50 would fit, but the tokens that come back are the urgent call's.
    expect(reason(await asks("not-urgent", 50))).toBe("urgent");
    expect(reason(await asks("later", 50, deadline + 1_000))).toBe("urgent");
    expect(reason(await asks("earlier", 50, deadline - 1_000))).toBe("reserved");
    // The limiter page counts the urgent calls waiting, here for tokens.
    const limiter = createProviderLimiter({ redis: connection, timeScale: 1_000_000, tokens });
    expect((await limiter.peek("model")).waiting).toMatchObject({ urgent: 2, nearestDeadlineAt: deadline });

    await tokens.settle("model", (big as { reservation: TokenReservation }).reservation, "nothing");
    expect(reason(await asks("urgent", 500, deadline))).toBe("reserved");
    expect(reason(await asks("later", 50, deadline + 1_000))).toBe("reserved");
    expect(reason(await asks("not-urgent", 50))).toBe("reserved");
    expect((await limiter.peek("model")).waiting).toMatchObject({ urgent: 0, nearestDeadlineAt: null });
  });

  it("a call the limiter sends within two minutes of its job's deadline waits for its tokens as urgent, and is sent once they come back", async () => {
    const limiter = limiterOver(tokens, 1_000_000);
    const big = await asks("big", 900);
    const deadlineAt = Date.now() + 30_000_000_000; // 30 production seconds at this time scale
    const stop = new AbortController();
    let sent = false;
    const call = limiter.withSlot(
      "model",
      async () => {
        sent = true;
      },
      { tokens: needing(500), deadlineAt, maxWaitMs: 60_000_000_000, signal: stop.signal },
    );
    try {
      await waitFor(async () => (await connection.zcard(tokenUrgentKeys("model")[0])) === 1, {
        what: "the call to wait for tokens as urgent",
        timeoutMs: 5_000,
      });
      expect(reason(await asks("not-urgent", 50))).toBe("urgent");
      expect(sent).toBe(false);
      await tokens.settle("model", (big as { reservation: TokenReservation }).reservation, "nothing");
      await call;
      expect(sent).toBe(true);
    } finally {
      // A failed check must not leave the call asking for tokens under the next test.
      stop.abort();
      await call.catch(() => undefined);
    }
    expect(await connection.zcard(tokenUrgentKeys("model")[0])).toBe(0);
  });

  it("an urgent call that stops asking (its job ended or gave its slot back) holds no one back after its waiting time", async () => {
    expect(reason(await asks("big", 990))).toBe("reserved");
    expect(reason(await asks("gone", 500, Date.now() + 60_000, 200))).toBe("tokens");
    expect(reason(await asks("not-urgent", 5))).toBe("urgent");
    await waitFor(async () => reason(await asks("not-urgent", 5)) === "reserved", {
      what: "the urgent waiter to drop out",
      timeoutMs: 5_000,
    });
  });

  it("keeps nothing of urgent waiters once the last one stops asking, even if no call asks again", async () => {
    expect(reason(await asks("big", 990))).toBe("reserved");
    expect(reason(await asks("gone", 500, Date.now() + 60_000, 200))).toBe("tokens");
    expect(await connection.exists(...tokenUrgentKeys("model"))).toBe(2);
    await waitFor(async () => (await connection.exists(...tokenUrgentKeys("model"))) === 0, {
      what: "the urgent sets to expire",
      timeoutMs: 5_000,
    });
  });
});
