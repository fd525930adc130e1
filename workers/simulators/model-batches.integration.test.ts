import OpenAI, { AuthenticationError, BadRequestError, InternalServerError, NotFoundError, toFile } from "openai";
import type { ChatCompletion } from "openai/resources/chat/completions";
import { afterAll, describe, expect, it } from "vitest";
import { countPromptTokens } from "@/lib/modelcalls/tokens";
import type { ModelBatchesOptions } from "./model-batches";
import type { ModelSimulatorOptions } from "./model";
import { startSimulators, type RunningSimulators } from "./server";

/**
 * The batch service against the official OpenAI client, over a real HTTP server. Its clock is
 * the test's (`now`), so a batch's 24 hours pass in one assignment.
 */

const sims: RunningSimulators[] = [];
afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
});

/** Production ms at time scale 1 (so the clock reads in production time). */
async function simulator(
  model: ModelSimulatorOptions = {},
  batches: Omit<ModelBatchesOptions, keyof ModelSimulatorOptions> = {},
) {
  const clock = { t: Date.UTC(2026, 11, 4, 9) };
  const sim = await startSimulators({
    port: 0,
    model: { errorRate: 0, timeScale: 1, latencyMs: () => 1, models: ["bounded-sim-1"], ...model },
    modelBatches: { now: () => clock.t, turnaroundMs: () => 600_000, ...batches },
  });
  sims.push(sim);
  const client = new OpenAI({ baseURL: sim.modelBaseUrl, apiKey: model.apiKey ?? "sk-simulator", maxRetries: 0 });
  return { sim, client, clock };
}

const prompt = (counterparty: string) =>
  `Allowed categories (slug: name):\n- groceries: Groceries\n- transport: Transport\n- other: Other\n\nTransaction:\n${counterparty}`;
const line = (customId: string, counterparty: string, model = "bounded-sim-1") =>
  JSON.stringify({
    custom_id: customId,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model, temperature: 0, messages: [{ role: "user", content: prompt(counterparty) }] },
  });
const COUNTERPARTIES = [
  "REWE Markt",
  "Deutsche Bahn",
  "Acme GmbH",
  "Lidl",
  "Uber",
  "Unknown shop",
  "Aldi",
  "BVG",
  "Kiosk",
  "Edeka",
];
const file = (lines: string[]) => toFile(Buffer.from(`${lines.join("\n")}\n`), "batch.jsonl");

async function upload(client: OpenAI, lines = COUNTERPARTIES.map((c, i) => line(`tx-${i}`, c))) {
  return client.files.create({ file: await file(lines), purpose: "batch" });
}
async function submit(client: OpenAI, lines?: string[]) {
  const input = await upload(client, lines);
  return client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
}
const jsonl = async (client: OpenAI, fileId: string) =>
  (await (await client.files.content(fileId)).text())
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as OutputLine);

/** A line of an output or error file. */
interface OutputLine {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: ChatCompletion } | null;
  error: { code: string; message: string } | null;
}

describe("the simulated batch service through the official OpenAI client", () => {
  it("walks a batch from validating to completed, its requests done progressively, and answers each as the chat endpoint does", async () => {
    const { client, clock } = await simulator();
    const input = await upload(client);
    expect(input).toMatchObject({ object: "file", purpose: "batch", filename: "batch.jsonl", status: "processed" });
    const created = await client.batches.create({
      input_file_id: input.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { job: "j1" },
    });
    expect(created).toMatchObject({
      object: "batch",
      status: "validating",
      input_file_id: input.id,
      completion_window: "24h",
      request_counts: { total: 10, completed: 0, failed: 0 },
      output_file_id: null,
      metadata: { job: "j1" },
    });
    expect(created.expires_at).toBe(created.created_at + 24 * 3600);

    // 10 min turnaround: 30 s validating, 9 min in progress, 30 s finalizing.
    clock.t += 30_000 + 270_000;
    const halfway = await client.batches.retrieve(created.id);
    expect(halfway).toMatchObject({ status: "in_progress", request_counts: { total: 10, completed: 5, failed: 0 } });
    expect(halfway.in_progress_at).toBe(created.created_at + 30);
    clock.t += 280_000;
    expect((await client.batches.retrieve(created.id)).status).toBe("finalizing");
    clock.t += 20_000;
    const done = await client.batches.retrieve(created.id);
    expect(done).toMatchObject({
      status: "completed",
      request_counts: { total: 10, completed: 10, failed: 0 },
      error_file_id: null,
    });
    expect(done.completed_at).toBe(created.created_at + 600);

    const output = await jsonl(client, done.output_file_id!);
    expect(output.map((o) => o.custom_id)).toEqual(COUNTERPARTIES.map((_, i) => `tx-${i}`));
    const sync = await client.chat.completions.create({
      model: "bounded-sim-1",
      temperature: 0,
      messages: [{ role: "user", content: prompt("REWE Markt") }],
    });
    expect(output[0]).toMatchObject({
      id: expect.stringMatching(/^batch_req_/),
      error: null,
      response: {
        status_code: 200,
        request_id: expect.stringMatching(/^req_/),
        body: {
          object: "chat.completion",
          model: "bounded-sim-1",
          choices: [{ message: { content: sync.choices[0]!.message.content } }],
          usage: sync.usage,
        },
      },
    });
    expect(output.map((o) => o.response!.body.choices[0]!.message.content)).toEqual([
      "groceries",
      "transport",
      "other",
      "groceries",
      "transport",
      "other",
      "groceries",
      "transport",
      "other",
      "groceries",
    ]);
    expect(output[0]!.response!.body.usage!.prompt_tokens).toBe(
      countPromptTokens([{ role: "user", content: prompt("REWE Markt") }]),
    );
  });

  it("leaves a partial output after a cancel: the requests done so far, the rest in the error file as batch_cancelled", async () => {
    const { client, clock } = await simulator();
    const batch = await submit(client);
    clock.t += 30_000 + 3 * 54_000; // three of the ten requests done
    const cancelling = await client.batches.cancel(batch.id);
    expect(cancelling).toMatchObject({ status: "cancelling", request_counts: { completed: 3 } });
    expect(cancelling.cancelling_at).not.toBeNull();
    clock.t += 10 * 60_000; // long past the cancelling period and the turnaround: nothing more gets done
    const cancelled = await client.batches.retrieve(batch.id);
    expect(cancelled).toMatchObject({ status: "cancelled", request_counts: { total: 10, completed: 3, failed: 7 } });
    expect((await jsonl(client, cancelled.output_file_id!)).map((o) => o.custom_id)).toEqual(["tx-0", "tx-1", "tx-2"]);
    const errors = await jsonl(client, cancelled.error_file_id!);
    expect(errors).toHaveLength(7);
    expect(errors[0]).toMatchObject({ custom_id: "tx-3", response: null, error: { code: "batch_cancelled" } });
    // A second cancel answers the batch as it is; a finished batch cannot be cancelled.
    expect((await client.batches.cancel(batch.id)).status).toBe("cancelled");
  });

  it("refuses to cancel a completed batch with a 409", async () => {
    const { client, clock } = await simulator();
    const batch = await submit(client);
    clock.t += 600_000;
    await expect(client.batches.cancel(batch.id)).rejects.toMatchObject({ status: 409 });
  });

  it("expires every batch at its 24 h window when told to, with the requests done by then and the rest batch_expired", async () => {
    const { sim, client, clock } = await simulator({}, { turnaroundMs: () => 600_000 });
    const control = await fetch(`${sim.url}/_control/model/batches`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ expire: true }),
    });
    expect(await control.json()).toEqual({ expire: true, turnaroundMs: null, failing: false, failingCancel: false });
    const bad = await fetch(`${sim.url}/_control/model/batches`, { method: "POST", body: '{"expire":"yes"}' });
    expect(bad.status).toBe(400);
    expect(sim.faults.batches()).toEqual({ expire: true, turnaroundMs: null, failing: false, failingCancel: false });
    const batch = await submit(client);
    clock.t += 23 * 3_600_000;
    expect((await client.batches.retrieve(batch.id)).status).toBe("in_progress");
    clock.t += 3_600_000;
    const expired = await client.batches.retrieve(batch.id);
    expect(expired.status).toBe("expired");
    expect(expired.expired_at).toBe(batch.expires_at);
    const { completed, failed, total } = expired.request_counts!;
    expect(total).toBe(10);
    expect(completed).toBeGreaterThanOrEqual(4); // 24 h of a turnaround of 24–48 h
    expect(completed).toBeLessThan(10);
    expect(completed + failed).toBe(10);
    expect(await jsonl(client, expired.output_file_id!)).toHaveLength(completed);
    const errors = await jsonl(client, expired.error_file_id!);
    expect(errors.map((e) => e.error!.code)).toEqual(Array(failed).fill("batch_expired"));
  });

  it("takes a fixed turnaround from the fault knob", async () => {
    const { sim, client, clock } = await simulator();
    sim.faults.setBatches({ turnaroundMs: 3_600_000 });
    const batch = await submit(client);
    clock.t += 3_599_000;
    expect((await client.batches.retrieve(batch.id)).status).toBe("finalizing");
    clock.t += 1_000;
    expect((await client.batches.retrieve(batch.id)).status).toBe("completed");
  });

  it("answers 500 on every batch call while told to fail, and works again after", async () => {
    const { sim, client } = await simulator();
    const batch = await submit(client);
    sim.faults.setBatches({ failing: true });
    await expect(client.batches.retrieve(batch.id)).rejects.toBeInstanceOf(InternalServerError);
    await expect(upload(client)).rejects.toBeInstanceOf(InternalServerError);
    sim.faults.setBatches({ failing: false });
    expect((await client.batches.retrieve(batch.id)).id).toBe(batch.id);
  });

  it("refuses a bad file with a 400 naming the line, and keeps nothing of it", async () => {
    const { sim, client } = await simulator();
    const error = await upload(client, [
      line("a", "REWE"),
      '{"custom_id":"b","method":"POST","url":"/v1/chat/completions"}',
    ]).catch((e) => e);
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.error).toMatchObject({
      message: "line 2: body: Invalid input: expected record, received undefined",
      type: "invalid_request_error",
      code: "invalid_batch_file",
      param: "file",
    });
    expect(sim.modelBatches.files()).toBe(0);
    await expect(
      client.files.create({ file: await file([line("a", "x")]), purpose: "assistants" }),
    ).rejects.toBeInstanceOf(BadRequestError);
  });

  it("refuses a batch of an unknown file (404) or another endpoint or window (400)", async () => {
    const { client } = await simulator();
    await expect(
      client.batches.create({ input_file_id: "file-nope", endpoint: "/v1/chat/completions", completion_window: "24h" }),
    ).rejects.toBeInstanceOf(NotFoundError);
    const input = await upload(client);
    await expect(
      client.batches.create({ input_file_id: input.id, endpoint: "/v1/embeddings", completion_window: "24h" }),
    ).rejects.toMatchObject({ status: 400, error: { param: "endpoint" } });
    await expect(client.batches.retrieve("batch_nope")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("fails a batch of a model it does not serve at validation, naming the line", async () => {
    const { client, clock } = await simulator();
    const batch = await submit(client, [line("a", "REWE"), line("b", "Lidl", "gpt-nope")]);
    clock.t += 30_000;
    const failed = await client.batches.retrieve(batch.id);
    expect(failed).toMatchObject({
      status: "failed",
      errors: { data: [{ code: "model_not_found", line: 2, param: "body.model" }] },
      output_file_id: null,
    });
  });

  it("reports a request the sync endpoint would refuse as failed, in the error file with the same refusal", async () => {
    const { client, clock } = await simulator({ contextTokens: 60 });
    const long = JSON.stringify({
      custom_id: "long",
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: "bounded-sim-1", messages: [{ role: "user", content: "word ".repeat(200) }] },
    });
    const batch = await submit(client, [line("a", "REWE"), long]);
    clock.t += 600_000;
    const done = await client.batches.retrieve(batch.id);
    expect(done.request_counts).toEqual({ total: 2, completed: 1, failed: 1 });
    const [error] = await jsonl(client, done.error_file_id!);
    expect(error).toMatchObject({
      custom_id: "long",
      error: null,
      response: { status_code: 400, body: { error: { code: "context_length_exceeded" } } },
    });
  });

  it("fails the share of requests the model's error rate says, with a 500 in the error file, counted as they are done", async () => {
    const { client, clock } = await simulator({ errorRate: 1 });
    const batch = await submit(client);
    clock.t += 30_000 + 270_000;
    expect((await client.batches.retrieve(batch.id)).request_counts).toEqual({ total: 10, completed: 0, failed: 5 });
    clock.t += 300_000;
    const done = await client.batches.retrieve(batch.id);
    expect(done).toMatchObject({ status: "completed", output_file_id: null });
    const errors = await jsonl(client, done.error_file_id!);
    expect(errors.map((e) => e.response?.status_code)).toEqual(Array(10).fill(500));
  });

  it("asks for the key as the chat endpoint does", async () => {
    const { sim } = await simulator({ apiKey: "sk-right-key-123456" });
    const wrong = new OpenAI({ baseURL: sim.modelBaseUrl, apiKey: "sk-wrong-key-123456", maxRetries: 0 });
    await expect(wrong.batches.retrieve("batch_x")).rejects.toBeInstanceOf(AuthenticationError);
    await expect(upload(wrong)).rejects.toBeInstanceOf(AuthenticationError);
  });

  it("drops finished batches and their files after the retention, and the oldest beyond its cap", async () => {
    const { sim, client, clock } = await simulator({}, { retentionMs: 3_600_000, maxBatches: 2 });
    const first = await submit(client);
    clock.t += 600_000;
    await client.batches.retrieve(first.id); // completed: input and output files
    expect(sim.modelBatches.files()).toBe(2);
    await submit(client);
    // A third batch: the cap of two drops the finished one first.
    await submit(client);
    await expect(client.batches.retrieve(first.id)).rejects.toBeInstanceOf(NotFoundError);
    expect(sim.modelBatches.batches()).toBe(2);
    // With both in progress there is no room: a 429 until one has finished.
    await expect(submit(client)).rejects.toMatchObject({ status: 429 });
    clock.t += 600_000 + 3_600_000;
    await submit(client);
    expect(sim.modelBatches.batches()).toBe(1);
  });
});
