import { randomUUID } from "node:crypto";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { flushModelCallRecords, recordModelCall } from "./record";
import { getJobTokenUsage, getTokenUsage, type ModelPrices } from "./usage";

// Calls under a queue of the test's own, read with that queue as the filter.
const queues: string[] = [];
const tenants: string[] = [];
afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
  for (const queue of queues.splice(0)) await db().modelCall.deleteMany({ where: { queue } });
});
afterAll(async () => {
  await closeDb();
});

const PRICES: ModelPrices = { "sim-small": { prompt: 2, completion: 8 } };

describe("token usage per lane", () => {
  it("sums direct calls and a job's batch apart, each at its own price (the batch at half by default)", async () => {
    const queue = `lanes-${randomUUID().slice(0, 8)}`;
    queues.push(queue);
    const tenant = uniqueTenantSlug("lanes");
    tenants.push(tenant);
    const job = await makeJob(tenant, { kind: "csv_import", queue, softMs: 60_000, hardMs: 120_000 });
    const startedAt = new Date(Date.now() - 60_000);
    const base = { queue, jobKind: "csv_import", jobId: job.id, model: "sim-small", startedAt, outcome: "ok" } as const;
    await recordModelCall({ ...base, durationMs: 5, promptTokens: 1_000_000, completionTokens: 0 });
    await recordModelCall({
      ...base,
      type: "batch",
      lane: "batch",
      durationMs: 50,
      batchSize: 24,
      promptTokens: 2_000_000,
      completionTokens: 1_000_000,
    });
    await flushModelCallRecords();

    const usage = await getTokenUsage({ queue, range: "24h" }, new Date(), PRICES);
    const byLane = Object.fromEntries(usage.byLane.map((r) => [r.key, r]));
    expect(byLane.sync).toMatchObject({ calls: 1, promptTokens: 1_000_000, costUsd: 2 });
    // 2 M prompt tokens at 1 USD and 1 M completion at 4 USD: half the direct prices.
    expect(byLane.batch).toMatchObject({ calls: 1, promptTokens: 2_000_000, completionTokens: 1_000_000, costUsd: 6 });
    expect(usage.total.costUsd).toBe(8);
    expect((await getJobTokenUsage(job.id, PRICES)).costUsd).toBe(8);
  });
});
