import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { startProxy, type CuttableProxy } from "@/test/helpers/cuttable-proxy";

// A job row and its queue job exist together or not at all: the start of a job against a Redis
// reached through a proxy the test cuts (PostgreSQL is the real one).
let redisProxy: CuttableProxy;
type Modules = {
  db: typeof import("@/lib/db/client");
  create: typeof import("./create");
  createImport: typeof import("@/lib/imports/create-import");
  startOutcome: typeof import("./start-outcome");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  tenants: typeof import("@/test/helpers/tenants");
};
let m: Modules;
const tenants: string[] = [];

beforeAll(async () => {
  redisProxy = await startProxy(6379);
  vi.stubEnv("REDIS_URL", `redis://127.0.0.1:${redisProxy.port}`);
  m = {
    db: await import("@/lib/db/client"),
    create: await import("./create"),
    createImport: await import("@/lib/imports/create-import"),
    startOutcome: await import("./start-outcome"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    tenants: await import("@/test/helpers/tenants"),
  };
});
afterEach(async () => {
  await redisProxy.up();
  for (const slug of tenants.splice(0)) await m.tenants.deleteTenant(slug);
});
afterAll(async () => {
  await m.queues.closeQueues();
  await m.redis.closeRedis();
  await m.db.closeDb();
  await redisProxy.close();
});

const csv = new TextEncoder().encode(
  "date,amount,currency,counterparty,description\n2026-01-02,-1.50,EUR,REWE,row 1\n",
);
function newTenant(): string {
  const slug = m.tenants.uniqueTenantSlug("enqueue");
  tenants.push(slug);
  return slug;
}
const jobsOf = (slug: string) =>
  m.db.db().job.findMany({ where: { tenant: { slug } }, select: { id: true, status: true } });

describe("creating a job while the queue cannot take it", () => {
  it("Redis not answering: the start is refused within the enqueue timeout, as a 503 saying nothing was saved, and no row is left", async () => {
    const slug = newTenant();
    redisProxy.hang();
    const outcome = await m.startOutcome.startOrQueueUnavailable(
      m.createImport.createImport({ tenant: slug, filename: "a.csv", bytes: csv }),
    );
    // Without the enqueue's timeout the start would wait for Redis for as long as it hangs.
    expect(outcome.type).toBe("queue_unavailable");
    if (outcome.type !== "queue_unavailable") return;
    expect(m.startOutcome.describeQueueUnavailable(outcome, "import")).toMatchObject({
      status: 503,
      code: "queue_unavailable",
      message:
        "The import cannot be started right now (the job queue is unavailable). Nothing was saved; try again in a minute.",
    });
    expect(await jobsOf(slug)).toEqual([]);
    expect(await m.db.db().upload.count({ where: { job: { tenant: { slug } } } })).toBe(0);
  });

  it("Redis stopped: the same, and the next start once it is back creates the row and its queue job together", async () => {
    const slug = newTenant();
    await redisProxy.down();
    await expect(m.createImport.createImport({ tenant: slug, filename: "a.csv", bytes: csv })).rejects.toBeInstanceOf(
      m.create.EnqueueFailed,
    );
    expect(await jobsOf(slug)).toEqual([]);
    await redisProxy.up();
    const created = await vi.waitFor(
      () => m.createImport.createImport({ tenant: slug, filename: "a.csv", bytes: csv }),
      { timeout: 15_000, interval: 200 },
    );
    if (created.type !== "created") throw new Error(created.message);
    expect(await jobsOf(slug)).toEqual([{ id: created.jobId, status: "queued" }]);
    expect(await m.queues.queue("imports").getJob(created.jobId)).toMatchObject({
      data: expect.objectContaining({ jobId: created.jobId }),
    });
  });

  it("a row already taken over while its start waited for the queue is kept, and the start answers that it started", async () => {
    const slug = newTenant();
    redisProxy.hang();
    const pending = m.createImport.createImport({ tenant: slug, filename: "a.csv", bytes: csv });
    // Meanwhile the reaper queued the row and a worker started it (its first attempt).
    const [row] = await vi.waitFor(async () => {
      const rows = await jobsOf(slug);
      expect(rows).toHaveLength(1);
      return rows;
    });
    await m.db.db().job.update({ where: { id: row!.id }, data: { status: "running", attempt: 1 } });
    const created = await pending;
    expect(created).toMatchObject({ type: "created", jobId: row!.id });
    expect(await jobsOf(slug)).toEqual([{ id: row!.id, status: "running" }]);
  });

  it("a queue job whose row does not exist is dropped by the worker: finished, nothing run, nothing created", async () => {
    const { Worker } = await import("bullmq");
    const { queueProcessor } = await import("@/workers/queue-processor");
    const { PROCESSORS } = await import("@/workers/catalog");
    const { logger } = await import("@/lib/log");
    const { env } = await import("@/lib/env");
    const q = m.queues.queue("documents");
    await q.drain(true);
    const orphan = randomUUID();
    await q.add("bulk_ocr", { jobId: orphan }, { jobId: orphan, attempts: 1 });
    const connection = m.redis.createRedis("worker");
    const worker = new Worker(
      "documents",
      queueProcessor("documents", {
        processors: PROCESSORS,
        shutdown: new AbortController().signal,
        log: logger("test"),
      }),
      {
        connection,
        prefix: env().BOUNDED_REDIS_PREFIX,
      },
    );
    try {
      await vi.waitFor(async () => expect(await q.getJobState(orphan)).not.toMatch(/waiting|active|prioritized/), {
        timeout: 15_000,
        interval: 100,
      });
      // Finished for good (completed, or failed saying the row does not exist), never retried.
      expect(["completed", "failed"]).toContain(await q.getJobState(orphan));
    } finally {
      await worker.close();
      await connection.quit();
    }
    expect(await m.db.db().job.findUnique({ where: { id: orphan } })).toBeNull();
    await q.remove(orphan);
  });
});
