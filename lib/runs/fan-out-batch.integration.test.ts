import { afterAll, afterEach, describe, expect, it, vi } from "vitest";

// Splitting on: a job projected not to fit its budget would become parts.
vi.stubEnv("BOUNDED_AUTO_SPLIT", "1");

const { closeDb, db } = await import("@/lib/db/client");
const { makeJob } = await import("@/test/helpers/jobs");
const { deleteTenant, uniqueTenantSlug } = await import("@/test/helpers/tenants");
const { fanOutIfTooBig } = await import("./fan-out");

const tenants: string[] = [];
afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(async () => {
  await closeDb();
  vi.unstubAllEnvs();
});

/** 20,000 rows in a 1 min budget: far past what fits. */
async function tooBig(label: string) {
  const tenant = uniqueTenantSlug(label);
  tenants.push(tenant);
  const job = await makeJob(tenant, { kind: "csv_import", total: 20_000, softMs: 60_000, hardMs: 90_000 });
  await db().job.update({ where: { id: job.id }, data: { status: "running", attempt: 1 } });
  const run = {
    jobId: job.id,
    attempt: 1,
    cursor: 0,
    kind: "csv_import",
    queue: "imports",
    tenantId: job.tenantId,
    parentId: null,
    total: 20_000,
    processed: 0,
    failed: 0,
    params: null,
    budgetSoftMs: 60_000,
    budgetHardMs: 90_000,
    budgetSource: "operator:test",
    slotMsUsed: 0,
  };
  return { job, run };
}

describe("fan-out and the batch lane", () => {
  it("never splits a job that sent its rows to the batch service; splits one that did not", async () => {
    const plain = await tooBig("fanout-plain");
    expect((await fanOutIfTooBig(plain.run)).type).toBe("split");

    const batched = await tooBig("fanout-batched");
    const now = new Date();
    await db().jobBatch.create({
      data: {
        jobId: batched.job.id,
        batchId: `batch_${batched.job.id}`,
        status: "in_progress",
        rows: 20_000,
        submittedAt: now,
        expectedBy: now,
        deadlineAt: now,
        lastMomentAt: now,
        decision: "Batch lane: test",
      },
    });
    expect((await fanOutIfTooBig(batched.run)).type).toBe("not_projected");
    expect(await db().job.count({ where: { parentId: batched.job.id } })).toBe(0);
  });
});
