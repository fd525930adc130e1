import { Worker } from "bullmq";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { reapStuckJobs } from "@/lib/runs/reaper";
import { closeRedis, createRedis, redis, type RedisClient } from "@/lib/redis/client";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { waitFor } from "@/test/helpers/wait";
import { QUEUE_NAMES } from "@/lib/catalog/catalog";
import { describePause, isQueuePaused, pausedHashKey, pausedQueues, pauseQueue, resumeQueue } from "./pause";
import { closeQueues, enqueueJob, queue } from "./queues";

/** A catalog queue no other suite of the test prefix runs workers on. */
const Q = "documents";
const alice = { username: "alice" };
const tenants: string[] = [];
const workers: Worker[] = [];
const connections: RedisClient[] = [];

async function resumeAll() {
  for (const name of QUEUE_NAMES) await queue(name).resume();
  await redis().del(pausedHashKey());
}

beforeEach(async () => {
  await resumeAll();
  await queue(Q).obliterate({ force: true });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.close(true)));
  await Promise.all(connections.splice(0).map((c) => c.quit().catch(() => undefined)));
  await resumeAll();
  await queue(Q).obliterate({ force: true });
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

/** A real BullMQ worker on Q that records what it started and holds each job until released. */
function startWorker() {
  const started: string[] = [];
  const releases = new Map<string, () => void>();
  const connection = createRedis("worker");
  connections.push(connection);
  const worker = new Worker(
    Q,
    async (job) => {
      started.push(job.id!);
      await new Promise<void>((resolve) => releases.set(job.id!, resolve));
    },
    { connection, prefix: env().BOUNDED_REDIS_PREFIX, concurrency: 4 },
  );
  workers.push(worker);
  return { started, release: (id: string) => releases.get(id)?.() };
}

describe("pausing a queue", () => {
  it("records who paused it and since when; pausing again changes nothing and says who did", async () => {
    expect(await pausedQueues()).toEqual(new Map());
    expect(await isQueuePaused(Q)).toBe(false);

    const before = Date.now();
    const paused = await pauseQueue(Q, alice);
    expect(paused).toMatchObject({ kind: "paused", queue: Q, by: "alice" });
    expect(await queue(Q).isPaused()).toBe(true);
    expect(await isQueuePaused(Q)).toBe(true);
    const info = (await pausedQueues()).get(Q);
    expect(info?.by).toBe("alice");
    expect(info!.since.getTime()).toBeGreaterThanOrEqual(before - 5);
    expect([...(await pausedQueues()).keys()]).toEqual([Q]);

    const again = await pauseQueue(Q, { username: "bob" });
    expect(again).toMatchObject({ kind: "already-paused", by: "alice" });
    expect(again.kind === "already-paused" && again.since.getTime()).toBe(info!.since.getTime());
    expect(describePause(again)).toMatchObject({ ok: true, status: 200, code: "already_paused" });
    expect((await pausedQueues()).get(Q)?.by).toBe("alice");
  });

  it("lets running jobs finish, starts nothing new until resumed, then runs what waited", async () => {
    const w = startWorker();
    await queue(Q).add(
      "bulk_ocr",
      { jobId: "00000000-0000-4000-8000-000000000001" },
      { jobId: "running-1", priority: 2 },
    );
    await waitFor(() => w.started.includes("running-1"), { what: "the first job to start", timeoutMs: 10_000 });

    await pauseQueue(Q, alice);
    await queue(Q).add("bulk_ocr", { jobId: "00000000-0000-4000-8000-000000000002" }, { jobId: "held-1", priority: 2 });
    w.release("running-1");
    await waitFor(async () => (await queue(Q).getJobState("running-1")) === "completed", {
      what: "the running job to finish",
      timeoutMs: 10_000,
    });
    // A clock on purpose: nothing starting is an absence, with no state to wait for. 500 ms is
    // long enough for an idle worker to have taken a job many times over.
    await new Promise((r) => setTimeout(r, 500));
    expect(w.started).toEqual(["running-1"]);
    expect(await queue(Q).getJobState("held-1")).toBe("prioritized");
    expect((await queue(Q).getJobCounts("prioritized")).prioritized).toBe(1);

    const resumed = await resumeQueue(Q);
    expect(resumed).toMatchObject({ kind: "resumed", queue: Q, pausedBy: "alice" });
    await waitFor(() => w.started.includes("held-1"), {
      what: "the held job to start after the resume",
      timeoutMs: 10_000,
    });
    w.release("held-1");
    await waitFor(async () => (await queue(Q).getJobState("held-1")) === "completed", {
      what: "the held job to finish",
      timeoutMs: 10_000,
    });
  });

  it("resuming clears the record; resuming a running queue changes nothing", async () => {
    await pauseQueue(Q, alice);
    expect(await resumeQueue(Q)).toMatchObject({ kind: "resumed", pausedBy: "alice" });
    expect(await isQueuePaused(Q)).toBe(false);
    expect(await redis().hget(pausedHashKey(), Q)).toBeNull();
    expect(await pausedQueues()).toEqual(new Map());
    const again = await resumeQueue(Q);
    expect(again).toEqual({ kind: "not-paused", queue: Q });
    expect(describePause(again)).toMatchObject({ ok: true, status: 200, code: "not_paused" });
  });

  it("a queue paused outside the app is reported, by 'unknown'", async () => {
    await queue(Q).pause();
    const info = (await pausedQueues()).get(Q);
    expect(info?.by).toBe("unknown");
  });

  it("refuses a queue the catalog does not know with a 404 that lists the queues", async () => {
    expect(await pauseQueue("nope", alice)).toEqual({ kind: "unknown-queue", queue: "nope" });
    expect(await resumeQueue("nope")).toEqual({ kind: "unknown-queue", queue: "nope" });
    expect(await isQueuePaused("nope")).toBe(false);
    const d = describePause({ kind: "unknown-queue", queue: "nope" });
    expect(d).toMatchObject({ ok: false, status: 404, code: "unknown_queue" });
    expect(d.message).toContain('No queue is called "nope"');
    expect(d.message).toContain("documents");
    expect((await pausedQueues()).size).toBe(0);
  });

  it("the reaper leaves a job waiting in a paused queue alone, even past its hard limit", async () => {
    const slug = uniqueTenantSlug("paused");
    tenants.push(slug);
    const { id } = await makeJob(slug, { kind: "bulk_ocr", queue: Q, total: 3, softMs: 600_000, hardMs: 900_000 });
    // Queued long ago (every limit scaled by the test's time scale is long past).
    await db().job.update({ where: { id }, data: { createdAt: new Date(Date.now() - 3_600_000) } });
    await pauseQueue(Q, alice);
    await enqueueJob(Q, "bulk_ocr", { jobId: id }, { priority: 2 });
    const reaped = await reapStuckJobs();
    expect(reaped.map((r) => r.id)).not.toContain(id);
    expect((await db().job.findUniqueOrThrow({ where: { id }, select: { status: true } })).status).toBe("queued");
  });
});
