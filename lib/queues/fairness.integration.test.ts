import { randomUUID } from "node:crypto";
import type { Job as QueueJob, Worker } from "bullmq";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { waitFor } from "@/test/helpers/wait";

// The queue order against the real PostgreSQL, Redis and BullMQ, on a Redis prefix of this file's
// own: no other worker takes these jobs, and no other test's jobs are in this queue.
const prefix = `${process.env.BOUNDED_REDIS_PREFIX ?? "bounded-test"}-fairness-${randomUUID().slice(0, 8)}`;
vi.stubEnv("BOUNDED_REDIS_PREFIX", prefix);

const operator: Principal = {
  userId: "00000000-0000-0000-0000-000000000003",
  username: "fair-oncall",
  role: "operator",
  via: "session",
};

// Imported after the prefix is stubbed: the environment is parsed once, on first use.
let m: {
  bullmq: typeof import("bullmq");
  db: typeof import("@/lib/db/client");
  create: typeof import("@/lib/jobs/create");
  retry: typeof import("@/lib/actions/retry");
  split: typeof import("@/lib/actions/split");
  parts: typeof import("@/lib/jobs/parts");
  fairness: typeof import("./fairness");
  queues: typeof import("./queues");
  redis: typeof import("@/lib/redis/client");
  tenants: typeof import("@/test/helpers/tenants");
};
const slugs: string[] = [];
const workers: Worker[] = [];

beforeAll(async () => {
  m = {
    bullmq: await import("bullmq"),
    db: await import("@/lib/db/client"),
    create: await import("@/lib/jobs/create"),
    retry: await import("@/lib/actions/retry"),
    split: await import("@/lib/actions/split"),
    parts: await import("@/lib/jobs/parts"),
    fairness: await import("./fairness"),
    queues: await import("./queues"),
    redis: await import("@/lib/redis/client"),
    tenants: await import("@/test/helpers/tenants"),
  };
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.close(true)));
  await m.queues.queue("imports").obliterate({ force: true });
  for (const slug of slugs.splice(0)) await m.tenants.deleteTenant(slug);
});

afterAll(async () => {
  const keys = await m.redis.redis().keys(`${prefix}:*`);
  if (keys.length) await m.redis.redis().del(...keys);
  await m.queues.closeQueues();
  await m.redis.closeRedis();
  await m.db.closeDb();
});

function tenant(label: string): string {
  const slug = m.tenants.uniqueTenantSlug(label);
  slugs.push(slug);
  return slug;
}

const importFor = async (slug: string) =>
  (await m.create.createJob({ kind: "csv_import", tenantSlug: slug, total: 1 })).jobId;
const queued = (id: string) => m.queues.queue("imports").getJob(id);

/** A worker of concurrency 1 on this file's prefix: the row ids of the queue jobs, in the order it takes them. */
function startWorker(processor: (job: QueueJob, token?: string) => Promise<void> = async () => undefined) {
  const order: string[] = [];
  const worker = new m.bullmq.Worker(
    "imports",
    async (job, token) => {
      order.push((job.data as { jobId: string }).jobId);
      await processor(job, token);
    },
    { connection: m.redis.createRedis("worker"), prefix, concurrency: 1 },
  );
  worker.on("error", () => undefined);
  workers.push(worker);
  return { worker, order };
}

describe("queue order between tenants (BullMQ priorities)", () => {
  it("serves tenants in turn and a retry first: a retry, then every tenant's 1st job, then the 2nd…, first in first out among equals", async () => {
    const a = tenant("fair-a");
    const b = tenant("fair-b");
    // An earlier import of A that timed out, to be retried once the backlog is queued.
    const timedOut = await importFor(a);
    await (await queued(timedOut))?.remove();
    await m.db.db().job.update({ where: { id: timedOut }, data: { status: "timed_out", attempt: 1 } });

    const aJobs: string[] = [];
    for (let i = 0; i < 5; i++) aJobs.push(await importFor(a));
    const bJob = await importFor(b);
    expect(await m.retry.retryJob(timedOut, operator)).toMatchObject({ type: "retried" });

    // Their places in line: A's 1st…5th open import, B's 1st, the retry.
    expect(await Promise.all(aJobs.map(async (id) => (await queued(id))?.priority))).toEqual([2, 3, 4, 5, 6]);
    expect((await queued(bJob))?.priority).toBe(2);
    expect((await queued(timedOut))?.priority).toBe(m.fairness.RETRY_PRIORITY);

    const { order } = startWorker();
    await waitFor(() => order.length === 7, { what: "the worker to take all seven jobs", timeoutMs: 15_000 });
    const [a1, a2, a3, a4, a5] = aJobs;
    expect(order).toEqual([timedOut, a1, bJob, a2, a3, a4, a5]);
  });

  it("a big file's later part waits behind another tenant's upload that arrived meanwhile, and a retry jumps ahead of both", async () => {
    const big = tenant("fair-big");
    const small = tenant("fair-small");
    // A big import of 900 rows that ran out of time at row 0, split by an operator into 3 parts:
    // part 1 is queued; part 2 is made when part 1 has sent out its last row.
    const bigJob = (await m.create.createJob({ kind: "csv_import", tenantSlug: big, total: 900 })).jobId;
    await (await queued(bigJob))?.remove();
    await m.db.db().job.update({ where: { id: bigJob }, data: { status: "timed_out", attempt: 1 } });
    const split = await m.split.splitJob(bigJob, operator, { parts: 3 });
    if (split.type !== "split") throw new Error(split.type);
    const part1 = split.children[0]!.jobId;
    // Part 1 runs (a worker slot), then the small tenant uploads, then part 1 sends its last row.
    await (await queued(part1))?.remove();
    await m.db.db().job.update({ where: { id: part1 }, data: { status: "running", attempt: 1 } });
    const smallJob = await importFor(small);
    expect(await m.parts.startNextPartEarly({ parentId: bigJob, index: 1 })).toBe(true);
    const part2 = (await m.db.db().job.findFirstOrThrow({ where: { parentId: bigJob, id: { not: part1 } } })).id;
    // And an earlier timed-out import of a third tenant is retried last of all.
    const other = await importFor(tenant("fair-retried"));
    await (await queued(other))?.remove();
    await m.db.db().job.update({ where: { id: other }, data: { status: "timed_out", attempt: 1 } });
    expect(await m.retry.retryJob(other, operator)).toMatchObject({ type: "retried" });

    // The part counts its open job and its running sibling: behind the small tenant's first upload.
    expect((await queued(part2))?.priority).toBe(4);
    expect((await queued(smallJob))?.priority).toBe(2);
    const { order } = startWorker();
    await waitFor(() => order.length === 3, { what: "the worker to take the three queued jobs", timeoutMs: 15_000 });
    expect(order).toEqual([other, smallJob, part2]);
  });

  it("a job the reschedule policy moves to delayed keeps its priority: back behind a lower number, ahead of a higher one", async () => {
    const a = tenant("fair-delay");
    const moved = await importFor(a); // priority 2
    const blocker = await importFor(a); // priority 3: runs while the moved job's delay ends
    let movedUntil: number | undefined;
    let endBlocker!: () => void;
    const blockerEnds = new Promise<void>((resolve) => (endBlocker = resolve));
    const { order } = startWorker(async (job, token) => {
      if (job.data.jobId === moved && movedUntil === undefined) {
        movedUntil = Date.now() + 50;
        // As lib/runs/reschedule.ts gives a slot back: moved to delayed with the lock token.
        await job.moveToDelayed(movedUntil, token);
        throw new m.bullmq.DelayedError();
      }
      if (job.data.jobId === blocker) await blockerEnds;
    });
    await waitFor(() => order.includes(blocker), { what: "the blocker to start", timeoutMs: 10_000 });
    // While the blocker runs: a retry (1) and a later job of priority 4 join the line.
    const retried = await importFor(tenant("fair-delay-r"));
    await (await queued(retried))?.remove();
    await m.db.db().job.update({ where: { id: retried }, data: { status: "timed_out" } });
    await m.retry.retryJob(retried, operator);
    const later = await importFor(a); // A's 3rd open import: priority 4
    expect((await queued(later))?.priority).toBe(4);
    const waiting = await queued(moved);
    expect([await waiting?.getState(), waiting?.priority]).toEqual(["delayed", 2]);

    // When the blocker ends, the worker promotes the moved job (its delay is over) and takes the
    // lowest number: the retry, then the moved job, then the later one.
    await waitFor(() => Date.now() > movedUntil!, { what: "the moved job's delay to be over", timeoutMs: 5_000 });
    endBlocker();
    await waitFor(() => order.length === 5, { what: "every job to be taken", timeoutMs: 10_000 });
    expect(order).toEqual([moved, blocker, retried, moved, later]);
  });

  it("a stalled job (its worker died) goes back to the plain wait list, ahead of every prioritized job, retries included", async () => {
    const a = tenant("fair-stall");
    const stalled = await importFor(a);
    // A worker that takes the job and dies: the lock is never renewed and runs out.
    const dead = new m.bullmq.Worker("imports", null, {
      connection: m.redis.createRedis("worker"),
      prefix,
      autorun: false,
      lockDuration: 200,
    });
    workers.push(dead);
    expect((await dead.getNextJob("dead-token"))?.id).toBe(stalled);
    const fresh = await importFor(tenant("fair-stall-b")); // priority 2
    const retried = await importFor(tenant("fair-stall-r"));
    await (await queued(retried))?.remove();
    await m.db.db().job.update({ where: { id: retried }, data: { status: "timed_out" } });
    await m.retry.retryJob(retried, operator); // priority 1

    // Another worker's stalled-job check (every 100 ms here) finds the job without a lock.
    const checker = new m.bullmq.Worker("imports", null, {
      connection: m.redis.createRedis("worker"),
      prefix,
      autorun: false,
      lockDuration: 200,
      stalledInterval: 100,
    });
    workers.push(checker);
    void checker.startStalledCheckTimer();
    await waitFor(async () => (await (await queued(stalled))?.getState()) === "waiting", {
      what: "the stalled job to be back in the plain wait list",
      timeoutMs: 10_000,
    });
    expect((await queued(stalled))?.priority).toBe(2);
    await checker.close(true);

    const { order } = startWorker();
    await waitFor(() => order.length === 3, { what: "every job to be taken", timeoutMs: 10_000 });
    expect(order).toEqual([stalled, retried, fresh]);
  });
});
