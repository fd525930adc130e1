import { randomUUID } from "node:crypto";
import { Worker } from "bullmq";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { processMetrics } from "@/lib/metrics/metrics";
import { closeQueues, queue } from "@/lib/queues/queues";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { getJobForensics } from "@/lib/reports/forensics";
import { countStuckByKind, listStuckJobs } from "./stuck";
import { reapStuckJobs } from "@/lib/runs/reaper";
import type { JobStatus } from "@/lib/core/job-statuses";

const tenants: string[] = [];
const queueJobIds: string[] = [];
const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);

beforeEach(async () => {
  // Queue jobs other suites left waiting in the test prefix would be taken first below.
  await queue("imports").drain(true);
});

afterEach(async () => {
  for (const id of queueJobIds.splice(0))
    await queue("imports")
      .remove(id)
      .catch(() => undefined);
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

/** A job row in a given state, as a worker would have left it (production budgets 600 s / 900 s). */
async function rowIn(
  status: JobStatus,
  fields: { heartbeatAt?: Date; createdAt?: Date; attemptStartedAt?: Date } = {},
) {
  const slug = uniqueTenantSlug("reap");
  tenants.push(slug);
  const { id } = await makeJob(slug, { total: 10, softMs: 600_000, hardMs: 900_000 });
  await db().job.update({
    where: { id },
    data: { status, attempt: status === "queued" ? 0 : 1, processed: 3, failed: 1, cursor: 4, ...fields },
  });
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
const row = (id: string) => db().job.findUniqueOrThrow({ where: { id } });
const crashResumedCount = async (kind: string) =>
  (await processMetrics().registry.getSingleMetric("bounded_jobs_crash_resumed_total")!.get()).values.find(
    (v) => v.labels.kind === kind,
  )?.value ?? NaN;
const eventsOf = async (id: string, type: string) =>
  db().jobEvent.findMany({ where: { jobId: id, type }, orderBy: { at: "asc" } });

describe("reaper", () => {
  it("resumes a running job silent past its hard limit plus the grace: a new attempt, counted, with its reason on the timeline", async () => {
    const id = await rowIn("running", { heartbeatAt: minutesAgo(30), attemptStartedAt: minutesAgo(31) });
    await addQueueJob(id);
    await takeWithoutFinishing(id);

    const before = await crashResumedCount("csv_import");
    const reaped = await reapStuckJobs();

    expect(reaped.find((r) => r.id === id)).toMatchObject({ action: "resumed", status: "queued" });
    // Counted where on-call watches worker deaths: bounded_jobs_crash_resumed_total{kind}.
    expect((await crashResumedCount("csv_import")) - before).toBe(1);
    const resumed = await row(id);
    expect(resumed).toMatchObject({ status: "queued", attempt: 2, crashResumes: 1, finishedAt: null });
    expect(Date.now() - resumed.heartbeatAt!.getTime()).toBeLessThan(60_000);
    const [event] = await eventsOf(id, "crash_resumed");
    expect(event?.message).toMatch(
      /^No sign of life for [\d.]+ (min|h)( \d+ min)?, past its hard limit of 15 min \(its worker stopped\): resumed from where it stopped, after 4 rows already done \(resume 1 of 3 after a stopped run\)\.$/,
    );
    // On the job page's timeline, in its own words.
    const timeline = (await getJobForensics(id))!.entries;
    expect(timeline.find((e) => e.kind === "event" && e.type === "crash_resumed")).toMatchObject({
      category: "event",
      attempt: 2,
      message: event!.message,
    });
    // The stopped run's queue job is still held by its lapsed lock: BullMQ hands it back, and the row is no longer the old attempt's.
    expect(await queue("imports").getJobState(id)).not.toBe("unknown");
  });

  it("leaves a running job with a recent heartbeat alone", async () => {
    const id = await rowIn("running", { heartbeatAt: new Date(), attemptStartedAt: minutesAgo(1) });
    await addQueueJob(id);
    await takeWithoutFinishing(id);
    await reapStuckJobs();
    expect(await status(id)).toBe("running");
  });

  it("a running row whose queue job waits for a worker (BullMQ handed it back): left to that worker within its limits, resumed by the reaper past them", async () => {
    const recent = await rowIn("running", { heartbeatAt: new Date(), attemptStartedAt: minutesAgo(1) });
    const silent = await rowIn("running", { heartbeatAt: minutesAgo(30), attemptStartedAt: minutesAgo(31) });
    for (const id of [recent, silent]) await addQueueJob(id);
    await reapStuckJobs();
    expect(await row(recent)).toMatchObject({ status: "running", attempt: 1, crashResumes: 0 });
    // Past its limits it is queued under a new attempt, with a fresh sign of life, at the front of the line.
    expect(await row(silent)).toMatchObject({ status: "queued", attempt: 2, crashResumes: 1 });
    expect((await queue("imports").getJob(silent))?.priority).toBe(1);
  });

  it("never reaps a job waiting in delayed for a rate-limit window, however old", async () => {
    const id = await rowIn("delayed", { heartbeatAt: minutesAgo(600), createdAt: minutesAgo(600) });
    queueJobIds.push(id);
    await queue("imports").add("csv_import", { jobId: id }, { jobId: id, delay: 60_000 });
    await reapStuckJobs();
    expect(await status(id)).toBe("delayed");
  });

  it("queues again a delayed row whose queue job is gone, instead of leaving it waiting forever", async () => {
    const id = await rowIn("delayed", { heartbeatAt: minutesAgo(5), createdAt: minutesAgo(5) });
    queueJobIds.push(id);
    const reaped = await reapStuckJobs();
    expect(reaped.find((r) => r.id === id)).toMatchObject({ action: "requeued" });
    expect(await row(id)).toMatchObject({ status: "queued", attempt: 2, crashResumes: 0 });
    const queued = await queue("imports").getJob(id);
    // It ran before: the front of the line, as a retry.
    expect(queued?.priority).toBe(1);
    expect(await queued?.getState()).toBe("prioritized");
    expect((await eventsOf(id, "requeued"))[0]?.message).toBe(
      "The queue had no job for it: queued again by the reaper, to continue where it stopped.",
    );
  });

  it("a backlog of queued jobs does not crowd a dead run out of the pass", async () => {
    const backlog = await Promise.all(Array.from({ length: 5 }, () => rowIn("queued", { createdAt: minutesAgo(300) })));
    for (const id of backlog) await addQueueJob(id);
    const dead = await rowIn("running", { heartbeatAt: minutesAgo(30), attemptStartedAt: minutesAgo(31) });
    queueJobIds.push(dead);
    await reapStuckJobs();
    expect(await row(dead)).toMatchObject({ status: "queued", crashResumes: 1 });
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

  it("resumes a row that says running while its queue job is gone: queued again at the front of the line under a new attempt", async () => {
    const id = await rowIn("running", { heartbeatAt: minutesAgo(5), attemptStartedAt: minutesAgo(5) });
    queueJobIds.push(id);
    await reapStuckJobs();
    const resumed = await row(id);
    expect(resumed).toMatchObject({ status: "queued", attempt: 2, crashResumes: 1 });
    expect(resumed.message).toBe(
      "Its run stopped and the queue no longer runs it (queue state: unknown): resumed from where it stopped, after 4 rows already done (resume 1 of 3 after a stopped run).",
    );
    const queued = await queue("imports").getJob(id);
    expect(queued?.data).toMatchObject({ jobId: id });
    expect(queued?.priority).toBe(1);
  });

  it("ends a job whose runs kept stopping, at the bound, with what was done and what to do", async () => {
    const id = await rowIn("running", { heartbeatAt: minutesAgo(5), attemptStartedAt: minutesAgo(5) });
    await db().job.update({ where: { id }, data: { crashResumes: 3 } });
    const reaped = await reapStuckJobs();
    expect(reaped.find((r) => r.id === id)).toMatchObject({ action: "stopped", status: "failed" });
    const ended = await row(id);
    expect(ended.status).toBe("failed");
    expect(ended.message).toBe(
      "Stopped after its worker died 4 times while running it; 4 of 10 rows were done. Retry to continue.",
    );
    expect(ended.finishedAt).not.toBeNull();
    expect(await queue("imports").getJob(id)).toBeUndefined();
  });

  it("queues a row whose queue job was never added, but only once the create-then-enqueue window has passed", async () => {
    const fresh = await rowIn("queued", { createdAt: new Date(Date.now() - 3_000) });
    const old = await rowIn("queued", { createdAt: minutesAgo(2) });
    queueJobIds.push(fresh, old);
    const reaped = await reapStuckJobs();
    expect(reaped.map((r) => r.id)).not.toContain(fresh);
    expect(await queue("imports").getJob(fresh)).toBeUndefined();
    expect(reaped.find((r) => r.id === old)).toMatchObject({ action: "requeued", status: "queued" });
    const queued = await queue("imports").getJob(old);
    // It never ran: its tenant's place in line, not a retry's.
    expect(queued?.priority).toBeGreaterThan(1);
    // Idempotent: a second pass finds it waiting and adds nothing.
    await reapStuckJobs();
    expect(await row(old)).toMatchObject({ status: "queued", attempt: 1 });
  });
});
