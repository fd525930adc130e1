import { randomUUID } from "node:crypto";
import { Worker } from "bullmq";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { closeQueues, queue } from "@/lib/queues/queues";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { countStuckByKind, listStuckJobs, reapStuckJobs } from "./stuck";
import type { JobStatus } from "./statuses";

const tenants: string[] = [];
const queueJobIds: string[] = [];
const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);

beforeEach(async () => {
  // Queue jobs other suites left waiting in the test prefix would be taken first below.
  await queue("imports").drain(true);
});

afterEach(async () => {
  for (const id of queueJobIds.splice(0)) await queue("imports").remove(id).catch(() => undefined);
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

/** A job row in a given state, as a worker would have left it (production budgets 600 s / 900 s). */
async function rowIn(status: JobStatus, fields: { heartbeatAt?: Date; createdAt?: Date; attemptStartedAt?: Date } = {}) {
  const slug = uniqueTenantSlug("reap");
  tenants.push(slug);
  const { id } = await makeJob(slug, { total: 10, softMs: 600_000, hardMs: 900_000 });
  await db().job.update({ where: { id }, data: { status, attempt: status === "queued" ? 0 : 1, processed: 3, failed: 1, cursor: 4, ...fields } });
  return id;
}

async function addQueueJob(id: string) {
  queueJobIds.push(id);
  await queue("imports").add("csv_import", { jobId: id }, { jobId: id });
}

/** Moves the queue job to active as a worker that then dies would: taken, never finished. */
async function takeWithoutFinishing(id: string) {
  const connection = createRedis("worker");
  const worker = new Worker("imports", null, { connection, prefix: env().BOUNDED_REDIS_PREFIX, autorun: false });
  const taken = await worker.getNextJob(randomUUID());
  expect(taken?.id).toBe(id);
  await worker.close(true);
  await connection.quit();
}

const status = async (id: string) => (await db().job.findUniqueOrThrow({ where: { id } })).status;

describe("reaper", () => {
  it("abandons a running job silent past its hard limit plus the grace, naming its progress", async () => {
    const id = await rowIn("running", { heartbeatAt: minutesAgo(30), attemptStartedAt: minutesAgo(31) });
    await addQueueJob(id);
    await takeWithoutFinishing(id);

    const reaped = await reapStuckJobs();

    expect(reaped.map((r) => r.id)).toContain(id);
    const row = await db().job.findUniqueOrThrow({ where: { id } });
    expect(row.status).toBe("abandoned");
    expect(row.message).toMatch(/^Abandoned after 4 of 10 rows: no sign of life for [\d.]+ (min|h)( \d+ min)?, past its hard limit of 15 min \(its worker stopped\)/);
    expect(row.finishedAt).not.toBeNull();
  });

  it("leaves a running job with a recent heartbeat alone", async () => {
    const id = await rowIn("running", { heartbeatAt: new Date(), attemptStartedAt: minutesAgo(1) });
    await addQueueJob(id);
    await takeWithoutFinishing(id);
    await reapStuckJobs();
    expect(await status(id)).toBe("running");
  });

  it("never reaps a job waiting in delayed for a rate-limit window, however old", async () => {
    const id = await rowIn("delayed", { heartbeatAt: minutesAgo(600), createdAt: minutesAgo(600) });
    queueJobIds.push(id);
    await queue("imports").add("csv_import", { jobId: id }, { jobId: id, delay: 60_000 });
    await reapStuckJobs();
    expect(await status(id)).toBe("delayed");
  });

  it("reconciles a delayed row whose queue job is gone: abandoned, not waiting forever", async () => {
    const id = await rowIn("delayed", { heartbeatAt: minutesAgo(5), createdAt: minutesAgo(5) });
    await reapStuckJobs();
    expect(await status(id)).toBe("abandoned");
  });

  it("a backlog of queued jobs does not crowd a dead run out of the pass", async () => {
    const backlog = await Promise.all(Array.from({ length: 5 }, () => rowIn("queued", { createdAt: minutesAgo(300) })));
    for (const id of backlog) await addQueueJob(id);
    const dead = await rowIn("running", { heartbeatAt: minutesAgo(30), attemptStartedAt: minutesAgo(31) });
    await reapStuckJobs();
    expect(await status(dead)).toBe("abandoned");
    for (const id of backlog) expect(await status(id)).toBe("queued");
  });

  it("leaves a queued job the queue still holds as waiting (it is waiting for a worker, and shown as a late start)", async () => {
    const id = await rowIn("queued", { createdAt: minutesAgo(120) });
    await addQueueJob(id);
    await reapStuckJobs();
    expect(await status(id)).toBe("queued");
    const stuck = await listStuckJobs();
    expect(stuck.find((s) => s.id === id)).toMatchObject({ reasons: ["late_start"], queueState: "waiting" });
    expect((await countStuckByKind()).csv_import).toBeGreaterThanOrEqual(1);
  });

  it("reconciles with the queue: a row that says running while its queue job is gone is abandoned", async () => {
    const id = await rowIn("running", { heartbeatAt: minutesAgo(5), attemptStartedAt: minutesAgo(5) });
    await reapStuckJobs();
    const row = await db().job.findUniqueOrThrow({ where: { id } });
    expect(row.status).toBe("abandoned");
    expect(row.message).toBe("Abandoned after 4 of 10 rows: the queue no longer runs it (queue state: unknown). Retry to continue from where it stopped.");
  });
});
