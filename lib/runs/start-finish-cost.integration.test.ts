import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { closeRedis } from "@/lib/redis/client";
import { logger } from "@/lib/log";
import { makeJob, queueJobFor } from "@/test/helpers/jobs";
import { roundTrips } from "@/test/helpers/round-trips";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { flushProjections } from "./projection-writes";
import { runJob } from "./run-job";

// What bench:overhead claims, held as a shape: a job's start (attempt, fence, budget, "started"
// event, an open cancel request, what its projection needs of the row) is one statement and its
// finish one more; the
// projection reads its kind's measures once for many starts and is kept on the rows in batches.
// Counted at the PostgreSQL client every query goes through.

const tenant = uniqueTenantSlug("start-finish-cost");

afterAll(async () => {
  await deleteTenant(tenant);
  await closeRedis();
  await closeDb();
});

/** A csv_import row as an upload leaves it: its rows counted and its file stored. */
async function importRow(rows: number): Promise<string> {
  const { id } = await makeJob(tenant, { total: rows, softMs: 600_000, hardMs: 900_000 });
  const content = Buffer.from(`date,amount\n${"2026-01-01,1.00\n".repeat(rows)}`);
  await db().upload.create({
    data: { jobId: id, filename: "f.csv", delimiter: ",", sizeBytes: content.length, content },
  });
  return id;
}

const shutdown = new AbortController().signal;
const log = logger("test");

/** Runs `id` as a worker does (start, cancel check, projection, processor, finish) with a processor that does nothing. */
async function startAndFinish(id: string): Promise<void> {
  await runJob({ csv_import: async () => undefined }, queueJobFor(id), shutdown, log);
}

describe("what a job's start and finish cost the database", () => {
  it("two statements a job: the projection's reads are shared by the starts and its writes batched", async () => {
    const jobs = 20;
    // One start first: it reads the kind's measures, which the next starts reuse.
    await startAndFinish(await importRow(20));
    const ids: string[] = [];
    for (let i = 0; i < jobs; i++) ids.push(await importRow(20));
    const began = performance.now();
    const trips = await roundTrips(async () => {
      for (const id of ids) await startAndFinish(id);
      await flushProjections();
    });
    const elapsedMs = performance.now() - began;
    // The projections' writes: one statement for every start of a tenth of a second (and the flush).
    const projectionWrites = trips.filter((t) => t.includes("'{projection}'")).length;
    expect(projectionWrites).toBeGreaterThanOrEqual(1);
    expect(projectionWrites).toBeLessThanOrEqual(Math.min(jobs, Math.ceil(elapsedMs / 100) + 1));
    // Everything else: the start and the finish, two a job.
    expect(trips.length - projectionWrites).toBe(2 * jobs);
    const rows = await db().job.findMany({ where: { id: { in: ids } }, select: { status: true, attempt: true } });
    expect(rows.every((r) => r.status === "completed" && r.attempt === 1)).toBe(true);
  });
});
