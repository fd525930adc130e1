import { Queue, Worker, type Job as QueueJob } from "bullmq";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { createJob } from "@/lib/jobs/create";
import { JobFailed } from "@/lib/core/signals";
import { logger } from "@/lib/log";
import { closeQueues } from "@/lib/queues/queues";
import { closeRedis, createRedis, type RedisClient } from "@/lib/redis/client";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { waitFor } from "@/test/helpers/wait";
import type { Processor } from "@/lib/runs/processor";
import { queueProcessor } from "./queue-processor";

/**
 * A queue job retried from outside Bounded (BullMQ's `job.retry()`, as bull-board does it) with
 * a real worker: the row resumes at its cursor with a fenced new attempt, or the queue job fails
 * with a reason that says why — never "completed" while the row says failed.
 */
vi.hoisted(() => {
  // Budgets no cold start can reach at the test time scale: these runs end by their own outcome.
  process.env.BOUNDED_BUDGET_IMPORTS_SOFT_S = "100000";
  process.env.BOUNDED_BUDGET_IMPORTS_HARD_S = "200000";
});
const tenant = uniqueTenantSlug("queue-retry");
const connections: RedisClient[] = [];
let worker: Worker;
let outside: Queue;
/** How the processor behaves per job: fail first, then succeed. */
const plans = new Map<string, ("fail" | "ok" | "progress")[]>();
const ran: { jobId: string; attempt: number; cursor: number }[] = [];

const processor: Processor = async (ctx) => {
  ran.push({ jobId: ctx.run.jobId, attempt: ctx.run.attempt, cursor: ctx.run.cursor });
  const next = plans.get(ctx.run.jobId)?.shift() ?? "ok";
  if (next === "progress") {
    // Committed counts reach the queue job while the run is still going (at a heartbeat).
    await db().job.update({ where: { id: ctx.run.jobId }, data: { processed: 1, failed: 1 } });
    await waitFor(
      async () =>
        JSON.stringify((await outside.getJob(ctx.run.jobId))?.progress) ===
        JSON.stringify({ processed: 1, failed: 1, total: 2 }),
      {
        what: "the running job's progress on the queue job",
        timeoutMs: 10_000,
      },
    );
    return {};
  }
  if (next === "fail") {
    // One item committed before the failure: a resume starts after it.
    await db().job.update({ where: { id: ctx.run.jobId }, data: { cursor: 1, processed: 1 } });
    throw new JobFailed("the input could not be read");
  }
  await db().job.update({ where: { id: ctx.run.jobId }, data: { cursor: 2, processed: 2 } });
  return {};
};

const row = (id: string) =>
  db().job.findUniqueOrThrow({ where: { id }, select: { status: true, attempt: true, cursor: true, message: true } });

async function finished(id: string): Promise<QueueJob> {
  return (await waitFor(
    async () => {
      const state = await outside.getJobState(id);
      // Read after the state: the queue job as it finished.
      return (state === "failed" || state === "completed") && outside.getJob(id);
    },
    { what: `queue job ${id} to finish`, timeoutMs: 20_000 },
  ))!;
}

beforeAll(async () => {
  const connection = createRedis("worker");
  connections.push(connection);
  worker = new Worker(
    "imports",
    queueProcessor("imports", {
      processors: { csv_import: processor },
      shutdown: new AbortController().signal,
      log: logger("test"),
    }),
    {
      connection,
      prefix: env().BOUNDED_REDIS_PREFIX,
      // An idle worker looks for new jobs every second (not every 5 s): the retried job is picked up soon.
      drainDelay: 1,
    },
  );
  worker.on("error", () => undefined);
  const bare = createRedis("worker");
  connections.push(bare);
  // What an outside tool holds: a plain BullMQ Queue on the same Redis and prefix.
  outside = new Queue("imports", { connection: bare, prefix: env().BOUNDED_REDIS_PREFIX });
});

afterAll(async () => {
  await worker.close();
  await outside.close();
  for (const c of connections) await c.quit().catch(() => undefined);
  await deleteTenant(tenant);
  await closeQueues();
  await closeRedis();
  await closeDb();
});

describe("a queue job retried from outside Bounded", () => {
  it("resumes a failed job at its cursor under a new, fencing attempt and completes both", async () => {
    const { jobId } = await createJob({ kind: "csv_import", tenantSlug: tenant, total: 2 });
    plans.set(jobId, ["fail", "ok"]);
    const failed = await finished(jobId);
    expect(await failed.getState()).toBe("failed");
    expect(failed.failedReason).toBe("the input could not be read");
    expect(await row(jobId)).toMatchObject({ status: "failed", attempt: 1 });

    await failed.retry();
    const done = await waitFor(
      async () => (await outside.getJobState(jobId)) === "completed" && outside.getJob(jobId),
      { what: "the retried queue job to complete", timeoutMs: 20_000 },
    );
    expect(done!.attemptsMade).toBe(2);
    expect(await row(jobId)).toMatchObject({ status: "completed", attempt: 2, cursor: 2 });
    expect(ran.filter((r) => r.jobId === jobId)).toEqual([
      { jobId, attempt: 1, cursor: 0 },
      { jobId, attempt: 2, cursor: 1 },
    ]);
    const events = await db().jobEvent.findMany({ where: { jobId, type: "retry" }, select: { message: true } });
    expect(events).toEqual([
      { message: "Retried from the queue (outside Bounded): resumes after 1 row already done." },
    ]);
    await waitFor(
      async () =>
        JSON.stringify((await outside.getJob(jobId))?.progress) ===
        JSON.stringify({ processed: 2, failed: 0, total: 2 }),
      {
        what: "the final counts on the queue job",
        timeoutMs: 10_000,
      },
    );
  });

  it("mirrors the row's counts to the queue job's progress while it runs", async () => {
    const { jobId } = await createJob({ kind: "csv_import", tenantSlug: tenant, total: 2 });
    plans.set(jobId, ["progress"]);
    const done = await finished(jobId);
    expect(await done.getState()).toBe("completed");
    expect(await row(jobId)).toMatchObject({ status: "completed_with_errors" });
  });

  it("fills in what a queue job enqueued with only the row id runs (kind, tenant) once it starts", async () => {
    const { jobId } = await createJob({ kind: "csv_import", tenantSlug: tenant, total: 2 });
    await finished(jobId);
    await db().job.update({ where: { id: jobId }, data: { status: "queued" } });
    await (await outside.getJob(jobId))!.remove();
    await outside.add("csv_import", { jobId }, { jobId });
    const done = await finished(jobId);
    const { tenantId } = await db().job.findUniqueOrThrow({ where: { id: jobId }, select: { tenantId: true } });
    expect(done.data).toEqual({ jobId, kind: "csv_import", tenantId, total: 2 });
  });

  it("fails a queue job added again for a finished job with a reason, and leaves the row as it was", async () => {
    const { jobId } = await createJob({ kind: "csv_import", tenantSlug: tenant, total: 2 });
    plans.set(jobId, ["fail"]);
    const failed = await finished(jobId);
    const data = failed.data;
    await failed.remove();
    // Not a retry of the finished queue job: a fresh one with the same data, as a script might add it.
    await outside.add("csv_import", data, { jobId });
    const again = await waitFor(
      async () => {
        const job = await outside.getJob(jobId);
        return job?.failedReason && job;
      },
      { what: "the re-added queue job to fail", timeoutMs: 20_000 },
    );
    expect(await again.getState()).toBe("failed");
    expect(again.failedReason).toMatch(
      /^The job is already failed in Bounded; this queue job was not run\. To resume it, retry it in Bounded/,
    );
    expect(await row(jobId)).toMatchObject({ status: "failed", attempt: 1 });
    expect(ran.filter((r) => r.jobId === jobId)).toHaveLength(1);
  });
});
