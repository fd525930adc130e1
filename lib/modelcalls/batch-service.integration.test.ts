import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { breakerKey } from "@/lib/ratelimit/breaker";
import { closeRedis, redis } from "@/lib/redis/client";
import type { ModelSimulatorOptions } from "@/workers/simulators/model";
import { startSimulators, type RunningSimulators } from "@/workers/simulators/server";
import { batchAnswers, type BatchRequest, cancelBatch, findBatch, getBatch, submitBatch } from "./batch-service";
import { chatCompletion } from "./chat-completion";
import { ModelCallError } from "./errors";
import { countPromptTokens } from "./tokens";

/**
 * The platform's batch client against the simulated batch service over real HTTP (and the
 * model's circuit breaker in the real Redis). The simulator's clock is the test's, so a batch's
 * hours pass in one assignment; the client's own time limits run at the tests' time scale.
 */

const sims: RunningSimulators[] = [];
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await closeRedis();
});
// The model's circuit breaker (in Redis) would carry one test's failures into the next.
beforeEach(async () => {
  await redis().del(breakerKey("model"));
});

async function simulator(model: ModelSimulatorOptions = {}) {
  const clock = { t: Date.now() };
  const sim = await startSimulators({
    port: 0,
    model: { errorRate: 0, timeScale: 1, latencyMs: () => 1, models: ["bounded-sim-1"], ...model },
    modelBatches: { now: () => clock.t, turnaroundMs: () => 600_000 },
  });
  sims.push(sim);
  // Where the calls go, as MODEL_BASE_URL / MODEL_API_KEY / MODEL_NAME would say.
  const options = { baseUrl: sim.modelBaseUrl, apiKey: "sk-simulator", maxRetries: 0 };
  return { sim, clock, options };
}

const categories = "Allowed categories (slug: name):\n- groceries: Groceries\n- transport: Transport\n- other: Other";
const request = (customId: string, counterparty: string): BatchRequest => ({
  customId,
  messages: [
    { role: "system", content: "Answer with the slug only." },
    { role: "user", content: `${categories}\n\nTransaction:\n${counterparty}` },
  ],
});
const REQUESTS = ["REWE Markt", "Deutsche Bahn", "Acme GmbH", "Lidl"].map((c, i) => request(`row-${i}`, c));

describe("the batch service client", () => {
  it("submits a batch, follows it to completed, and reads answers equal to the sync calls', with their tokens", async () => {
    const { sim, clock, options } = await simulator();
    const submitted = await submitBatch(REQUESTS, { ...options, context: { jobId: "j-1", tenant: "acme", rows: 4 } });
    expect(submitted).toMatchObject({
      status: "validating",
      total: 4,
      completed: 0,
      failed: 0,
      outputFileId: null,
      errorFileId: null,
    });
    expect(submitted.expiresAt!.getTime() - submitted.createdAt.getTime()).toBe(24 * 3_600_000);
    expect((await answersOf(sim, submitted.id)).metadata).toEqual({ jobId: "j-1", tenant: "acme", rows: "4" });
    // Every line asks the configured model at temperature 0.
    const input = await fileLines(sim, (await answersOf(sim, submitted.id)).input_file_id);
    expect(input[0]).toEqual({
      custom_id: "row-0",
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: "bounded-sim-1", messages: REQUESTS[0]!.messages, temperature: 0 },
    });

    clock.t += 30_000 + 270_000;
    expect(await getBatch(submitted.id, options)).toMatchObject({ status: "in_progress", completed: 2 });
    expect(await batchAnswers(await getBatch(submitted.id, options), options)).toEqual(new Map());
    clock.t += 300_000;
    const done = await getBatch(submitted.id, options);
    expect(done).toMatchObject({ status: "completed", total: 4, completed: 4, failed: 0 });

    const answers = await batchAnswers(done, options);
    expect([...answers.keys()]).toEqual(["row-0", "row-1", "row-2", "row-3"]);
    const sync = await chatCompletion({
      messages: REQUESTS[0]!.messages,
      temperature: 0,
      signal: new AbortController().signal,
      context: {},
      record: async () => {},
      ...options,
    });
    expect(answers.get("row-0")).toEqual({
      content: sync.content,
      promptTokens: countPromptTokens(REQUESTS[0]!.messages),
      completionTokens: sync.usage.completionTokens,
    });
    expect([...answers.values()].map((a) => a.content)).toEqual(["groceries", "transport", "other", "groceries"]);
  });

  it("reads the partial answers of a cancelled batch, the requests not done absent", async () => {
    const { clock, options } = await simulator();
    const batch = await submitBatch(REQUESTS, options);
    clock.t += 30_000 + 2 * 135_000; // two of the four done
    expect((await cancelBatch(batch.id, options)).status).toBe("cancelling");
    clock.t += 60_000;
    const cancelled = await getBatch(batch.id, options);
    expect(cancelled).toMatchObject({ status: "cancelled", completed: 2, failed: 2 });
    expect([...(await batchAnswers(cancelled, options)).keys()]).toEqual(["row-0", "row-1"]);
    // Cancelling again, or a batch that has ended, answers its state.
    expect((await cancelBatch(batch.id, options)).status).toBe("cancelled");
  });

  it("finds the newest batch whose metadata names a job, through the provider's list, and none for another job", async () => {
    const { options } = await simulator();
    const first = await submitBatch(REQUESTS, { ...options, context: { jobId: "j-find" } });
    const other = await submitBatch(REQUESTS, { ...options, context: { jobId: "j-other" } });
    const second = await submitBatch(REQUESTS, { ...options, context: { jobId: "j-find" } });
    expect(first.id).not.toBe(second.id);
    expect(await findBatch("jobId", "j-find", options)).toMatchObject({ id: second.id, status: "validating" });
    expect(await findBatch("jobId", "j-other", options)).toMatchObject({ id: other.id });
    expect(await findBatch("jobId", "j-none", options)).toBeNull();
  });

  it("answers the state of a completed batch when asked to cancel it", async () => {
    const { clock, options } = await simulator();
    const batch = await submitBatch(REQUESTS, options);
    clock.t += 600_000;
    expect(await cancelBatch(batch.id, options)).toMatchObject({ status: "completed", completed: 4 });
  });

  it("reads the partial answers of an expired batch", async () => {
    const { sim, clock, options } = await simulator();
    sim.faults.setBatches({ expire: true });
    const batch = await submitBatch(REQUESTS, options);
    clock.t += 24 * 3_600_000;
    const expired = await getBatch(batch.id, options);
    expect(expired.status).toBe("expired");
    expect(expired.completed + expired.failed).toBe(4);
    expect((await batchAnswers(expired, options)).size).toBe(expired.completed);
  });

  it("leaves a request the service refused out of the answers", async () => {
    const { clock, options } = await simulator({ contextTokens: 80 });
    const batch = await submitBatch(
      [REQUESTS[0]!, { customId: "long", messages: [{ role: "user", content: "word ".repeat(200) }] }],
      options,
    );
    clock.t += 600_000;
    const done = await getBatch(batch.id, options);
    expect(done).toMatchObject({ completed: 1, failed: 1 });
    expect([...(await batchAnswers(done, options)).keys()]).toEqual(["row-0"]);
  });

  it("refuses requests it cannot send before any call: none, too many, repeated ids", async () => {
    const { options } = await simulator();
    await expect(submitBatch([], options)).rejects.toThrow(RangeError);
    await expect(submitBatch([REQUESTS[0]!, REQUESTS[0]!], options)).rejects.toThrow(/distinct custom ids/);
  });

  it("ends with a ModelCallError with status 404 for a batch the service does not know, without opening the breaker", async () => {
    const { options } = await simulator();
    const error = await getBatch("batch_nope", options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error).toMatchObject({ status: 404, retryable: false });
    expect(await redis().hget(breakerKey("model"), "state")).not.toBe("misconfigured");
  });

  it("retries a batch service that fails, then ends with a retryable ModelCallError", async () => {
    const { sim, options } = await simulator();
    const batch = await submitBatch(REQUESTS, options);
    sim.faults.setBatches({ failing: true });
    const error = await getBatch(batch.id, { ...options, maxRetries: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error).toMatchObject({ status: 500, attempts: 2, retryable: true });
    sim.faults.setBatches({ failing: false });
    expect((await getBatch(batch.id, options)).id).toBe(batch.id);
  });

  it("takes a refused key for the model service misconfigured, as a chat completion does", async () => {
    const { options } = await simulator({ apiKey: "sk-the-right-key-1234" });
    const error = await getBatch("batch_x", { ...options, apiKey: "sk-a-wrong-key-98765" }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "OutsideServiceDown", service: "model" });
    expect(await redis().hget(breakerKey("model"), "state")).toBe("misconfigured");
  });

  it("gives up on a silent service at its time limit instead of hanging", async () => {
    const { sim, options } = await simulator();
    sim.faults.setSilent("model", true);
    const started = performance.now();
    // The time limit: 120 s production at the tests' scale, never under 2 s.
    const error = await getBatch("batch_x", { ...options, timeScale: 0.001 }).catch((e: unknown) => e);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(error).toBeInstanceOf(ModelCallError);
    expect(error).toMatchObject({ retryable: true, status: undefined });
    expect((error as Error).message).toMatch(/no answer within 2000 ms/);
  });

  it("rejects with the caller's signal's reason when it aborts", async () => {
    const { sim, options } = await simulator();
    sim.faults.setSilent("model", true);
    const controller = new AbortController();
    const reason = new Error("deadline");
    setTimeout(() => controller.abort(reason), 100);
    await expect(getBatch("batch_x", { ...options, signal: controller.signal })).rejects.toBe(reason);
  });
});

/** The batch as the simulator holds it (through its HTTP API, as any client would read it). */
async function answersOf(sim: RunningSimulators, id: string) {
  const response = await fetch(`${sim.modelBaseUrl}/batches/${id}`);
  return (await response.json()) as { metadata: Record<string, string>; input_file_id: string };
}
async function fileLines(sim: RunningSimulators, id: string) {
  const text = await (await fetch(`${sim.modelBaseUrl}/files/${id}/content`)).text();
  return text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as unknown);
}
