import { randomUUID } from "node:crypto";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { EnvError, parseEnv } from "@/lib/env";
import { processMetrics } from "@/lib/metrics/metrics";
import { JOB_KINDS } from "@/lib/catalog/catalog";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { flushModelCallRecords, recordModelCall, type ModelCallRecord } from "./record";
import { estimateCostUsd, getJobTokenUsage, getTokenUsage, type ModelPrices, priceOf } from "./usage";

// Every test writes calls under its own queue (and jobs under its own tenants), and reads with
// that queue as the filter, so other tests' rows never show up in the assertions.
const queues: string[] = [];
const tenants: string[] = [];

afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
  for (const queue of queues.splice(0)) await db().modelCall.deleteMany({ where: { queue } });
});

afterAll(async () => {
  await closeDb();
});

const PRICES: ModelPrices = {
  "sim-small": { prompt: 0.15, completion: 0.6 },
  "sim-large": { prompt: 2.5, completion: 10 },
};
const MINUTE = 60_000;

async function fixture() {
  const queue = `usage-${randomUUID().slice(0, 8)}`;
  queues.push(queue);
  const [acme, beta] = [uniqueTenantSlug("usage-acme"), uniqueTenantSlug("usage-beta")];
  tenants.push(acme, beta);
  const budget = { softMs: 60_000, hardMs: 120_000 };
  const importJob = await makeJob(acme, { kind: "csv_import", queue, ...budget });
  const agentJob = await makeJob(beta, { kind: "agent_run", queue, ...budget });
  const now = new Date();
  const call = (c: Partial<ModelCallRecord>): ModelCallRecord => ({
    queue,
    model: "sim-small",
    startedAt: new Date(now.getTime() - MINUTE),
    durationMs: 5,
    outcome: "ok",
    ...c,
  });
  const calls: ModelCallRecord[] = [
    call({ jobKind: "csv_import", jobId: importJob.id, promptTokens: 1_000, completionTokens: 100 }),
    call({ jobKind: "csv_import", jobId: importJob.id, promptTokens: 3_000, completionTokens: 300 }),
    call({
      jobKind: "agent_run",
      jobId: agentJob.id,
      model: "sim-large",
      promptTokens: 10_000,
      completionTokens: 2_000,
    }),
    // A model without a price: counted, left out of the cost, and said so.
    call({ jobKind: "agent_run", jobId: agentJob.id, model: "unpriced", promptTokens: 500, completionTokens: 50 }),
    // A call outside any job.
    call({ jobKind: "categorise", promptTokens: 40, completionTokens: 4 }),
    // Not counted: no tokens (an error, or a row recorded before tokens were), another call type, outside the window.
    call({ jobKind: "csv_import", jobId: importJob.id, outcome: "error", error: "HTTP 500: overloaded" }),
    call({ jobKind: "csv_import", jobId: importJob.id, type: "ocr", model: "ocr", promptTokens: 99_999 }),
    call({
      jobKind: "csv_import",
      jobId: importJob.id,
      startedAt: new Date(now.getTime() - 2 * 3_600_000),
      promptTokens: 77_777,
      completionTokens: 7,
    }),
  ];
  await Promise.all(calls.map(recordModelCall));
  await flushModelCallRecords();
  return { queue, acme, beta, importJob, agentJob, now };
}

describe("token usage", () => {
  it("sums tokens and the estimated cost per kind, per tenant and per job, within the range and filters", async () => {
    const { queue, acme, beta, importJob, agentJob, now } = await fixture();
    const usage = await getTokenUsage({ range: "1h", queue }, now, PRICES);

    const smallImport = (4_000 * 0.15 + 400 * 0.6) / 1e6;
    const largeAgent = (10_000 * 2.5 + 2_000 * 10) / 1e6;
    const outside = (40 * 0.15 + 4 * 0.6) / 1e6;
    expect(usage.total).toMatchObject({ calls: 5, promptTokens: 14_540, completionTokens: 2_454, unpriced: true });
    expect(usage.total.costUsd).toBeCloseTo(smallImport + largeAgent + outside, 12);

    expect(usage.byKind.map((r) => [r.key, r.promptTokens, r.completionTokens, r.unpriced])).toEqual([
      ["agent_run", 10_500, 2_050, true],
      ["csv_import", 4_000, 400, false],
      ["categorise", 40, 4, false],
    ]);
    expect(usage.byKind[0]!.costUsd).toBeCloseTo(largeAgent, 12);
    expect(usage.byKind[1]!.costUsd).toBeCloseTo(smallImport, 12);

    expect(usage.byTenant.map((r) => [r.key, r.calls])).toEqual([
      [beta, 2],
      [acme, 2],
      ["", 1],
    ]);
    expect(usage.byJob.map((r) => [r.key, r.promptTokens + r.completionTokens])).toEqual([
      [agentJob.id, 12_550],
      [importJob.id, 4_400],
    ]);
    // Per model: each provider's calls and cost apart.
    expect(usage.byModel.map((r) => [r.key, r.calls, r.promptTokens + r.completionTokens, r.unpriced])).toEqual([
      ["sim-large", 1, 12_000, false],
      ["sim-small", 3, 4_444, false],
      ["unpriced", 1, 550, true],
    ]);
    expect(usage.byModel[0]!.costUsd).toBeCloseTo(largeAgent, 12);
  });

  it("honours the kind and model filters, and the range", async () => {
    const { queue, now } = await fixture();
    expect((await getTokenUsage({ range: "1h", queue, kind: "csv_import" }, now, PRICES)).total.promptTokens).toBe(
      4_000,
    );
    expect((await getTokenUsage({ range: "1h", queue, model: "sim-large" }, now, PRICES)).total).toMatchObject({
      calls: 1,
      unpriced: false,
    });
    expect((await getTokenUsage({ range: "24h", queue, kind: "csv_import" }, now, PRICES)).total.promptTokens).toBe(
      81_777,
    );
  });

  it("totals one job's calls, and has no cost when no model has a price", async () => {
    const { importJob, agentJob } = await fixture();
    const job = await getJobTokenUsage(importJob.id, PRICES);
    expect(job).toMatchObject({ calls: 3, promptTokens: 81_777, completionTokens: 407, unpriced: false });
    expect(await getJobTokenUsage(agentJob.id, {})).toMatchObject({
      calls: 2,
      promptTokens: 10_500,
      costUsd: null,
      unpriced: true,
    });
    expect(await getJobTokenUsage(randomUUID(), PRICES)).toEqual({
      calls: 0,
      promptTokens: 0,
      completionTokens: 0,
      costUsd: null,
      unpriced: false,
    });
  });
});

describe("bounded_model_tokens_total", () => {
  const sample = async (kind: string, type: string) => {
    const line = (await processMetrics().registry.metrics())
      .split("\n")
      .find((l) => l.startsWith(`bounded_model_tokens_total{kind="${kind}",type="${type}"}`));
    return line === undefined ? undefined : Number(line.split(" ").at(-1));
  };

  it("starts at 0 for every kind of the catalog and both types, and counts the tokens of each recorded call", async () => {
    for (const kind of JOB_KINDS) {
      expect(await sample(kind, "prompt")).toBeGreaterThanOrEqual(0);
      expect(await sample(kind, "completion")).toBeGreaterThanOrEqual(0);
    }
    const queue = `usage-${randomUUID().slice(0, 8)}`;
    queues.push(queue);
    const [prompt, completion] = [await sample("bulk_ocr", "prompt"), await sample("bulk_ocr", "completion")];
    await recordModelCall({
      queue,
      jobKind: "bulk_ocr",
      model: "sim-small",
      startedAt: new Date(),
      durationMs: 3,
      outcome: "ok",
      promptTokens: 120,
      completionTokens: 8,
    });
    expect(await sample("bulk_ocr", "prompt")).toBe(prompt! + 120);
    expect(await sample("bulk_ocr", "completion")).toBe(completion! + 8);
  });
});

describe("BOUNDED_MODEL_PRICES", () => {
  it("defaults to a price for the simulator's model", () => {
    const prices = parseEnv({}).BOUNDED_MODEL_PRICES;
    expect(estimateCostUsd("bounded-sim-1", 1_000_000, 1_000_000, prices)).toBeGreaterThan(0);
    expect(estimateCostUsd("unknown", 1, 1, prices)).toBeNull();
  });

  it("prices the batch lane at half the sync price unless a batch price is set", () => {
    const prices = parseEnv({
      BOUNDED_MODEL_PRICES:
        '{"a": {"prompt": 0.2, "completion": 0.8}, "b": {"prompt": 0.2, "completion": 0.8, "batchPrompt": 0.15, "batchCompletion": 0.7}}',
    }).BOUNDED_MODEL_PRICES;
    expect(priceOf("a", "sync", prices)).toEqual({ prompt: 0.2, completion: 0.8 });
    expect(priceOf("a", "batch", prices)).toEqual({ prompt: 0.1, completion: 0.4 });
    expect(priceOf("b", "batch", prices)).toEqual({ prompt: 0.15, completion: 0.7 });
    expect(priceOf("b", "sync", prices)).toEqual({ prompt: 0.2, completion: 0.8 });
    expect(priceOf("unknown", "batch", prices)).toBeNull();
    expect(estimateCostUsd("a", 1_000_000, 1_000_000, prices, "batch")).toBeCloseTo(0.5);
    expect(estimateCostUsd("a", 1_000_000, 1_000_000, prices)).toBeCloseTo(1);
    // The default prices the simulator's model in both lanes.
    expect(priceOf("bounded-sim-1", "batch", parseEnv({}).BOUNDED_MODEL_PRICES)).toEqual({
      prompt: 0.075,
      completion: 0.3,
    });
  });

  it.each([
    ["not json"],
    ['{"m": {"prompt": -1, "completion": 1}}'],
    ['{"m": {"prompt": 1}}'],
    ['{"m": {"prompt": 1, "completion": 1, "cached": 1}}'],
    ['{"m": {"prompt": 1, "completion": 1, "batchPrompt": -0.5}}'],
    ['{"m": {"prompt": 1, "completion": 1, "batchPrompt": "half"}}'],
  ])("refuses %s, naming the variable", (value) => {
    expect(() => parseEnv({ BOUNDED_MODEL_PRICES: value })).toThrow(EnvError);
    expect(() => parseEnv({ BOUNDED_MODEL_PRICES: value })).toThrow(/^BOUNDED_MODEL_PRICES: /);
  });
});
