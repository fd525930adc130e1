import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { closeRedis, redis } from "@/lib/redis/client";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { QUEUE_NAMES } from "@/lib/catalog/catalog";
import { getQueuesOverview, projectDrain, readQueueGauges, THROUGHPUT_MINUTES } from "./overview";
import { pausedHashKey, pauseQueue } from "./pause";
import { announcePresence, withdrawPresence } from "./presence";
import { closeQueues, enqueueJob, queue } from "./queues";

/** A catalog queue no other suite of the test prefix runs workers on. */
const Q = "agent-interactive";
const tenants: string[] = [];
const presenceIds: string[] = [];

async function reset() {
  for (const name of QUEUE_NAMES) await queue(name).resume();
  await redis().del(pausedHashKey());
  await queue(Q).obliterate({ force: true });
}
beforeEach(reset);
afterEach(async () => {
  await reset();
  for (const id of presenceIds.splice(0)) await withdrawPresence(redis(), id);
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

async function tenant(label: string) {
  const slug = uniqueTenantSlug(label);
  tenants.push(slug);
  return slug;
}

/** A queued row with its queue job, as `createAgentRun` leaves it. */
async function queued(slug: string, fields: { createdAt?: Date; heartbeatAt?: Date } = {}) {
  const { id } = await makeJob(slug, { kind: "agent_run", queue: Q, total: 2, softMs: 60_000, hardMs: 90_000 });
  await db().job.update({ where: { id }, data: fields });
  await enqueueJob(Q, "agent_run", { jobId: id }, { priority: 2 });
  return id;
}

const ofQueue = async (now?: Date) => (await getQueuesOverview(now)).queues.find((q) => q.queue === Q)!;

describe("getQueuesOverview", () => {
  it("has every queue of the catalog, in catalog order", async () => {
    const o = await getQueuesOverview();
    expect(o.queues.map((q) => q.queue)).toEqual(QUEUE_NAMES);
    expect(o.timeScale).toBe(env().BOUNDED_TIME_SCALE);
  });

  it("counts waiting and delayed queue jobs as BullMQ holds them", async () => {
    const slug = await tenant("counts");
    expect((await ofQueue()).counts).toEqual({ waiting: 0, active: 0, delayed: 0, failed: 0 });
    await queued(slug);
    await queued(slug);
    await queue(Q).add(
      "agent_run",
      { jobId: "00000000-0000-4000-8000-00000000000d" },
      { jobId: "later", delay: 3_600_000 },
    );
    expect((await ofQueue()).counts).toEqual({ waiting: 2, active: 0, delayed: 1, failed: 0 });
  });

  it("the oldest wait is the oldest queued row's, since it last entered the queue, in production seconds", async () => {
    const slug = await tenant("oldest");
    const now = new Date();
    const scale = env().BOUNDED_TIME_SCALE;
    await queued(slug, { createdAt: new Date(now.getTime() - 2_000) });
    // Created long ago, queued again 5 s ago (a retry sets heartbeatAt): 5 s of waiting, not an hour.
    await queued(slug, {
      createdAt: new Date(now.getTime() - 3_600_000),
      heartbeatAt: new Date(now.getTime() - 5_000),
    });
    const q = await ofQueue(now);
    expect(q.oldestWaitingSeconds).toBeCloseTo(5 / scale, 0);
    const gauges = (await readQueueGauges(now)).find((g) => g.queue === Q)!;
    expect(gauges.oldestWaitingSeconds).toBeCloseTo(5 / scale, 0);
    // A queue with nothing queued: no age on the page, 0 on the gauge.
    await db().job.updateMany({ where: { tenant: { slug } }, data: { status: "completed" } });
    expect((await ofQueue(now)).oldestWaitingSeconds).toBeNull();
    expect((await readQueueGauges(now)).find((g) => g.queue === Q)!.oldestWaitingSeconds).toBe(0);
  });

  it("counts completed jobs per minute over the last hour and projects the drain from the last 10 minutes", async () => {
    const slug = await tenant("throughput");
    const now = new Date();
    const finished = async (
      secondsAgo: number,
      status: "completed" | "completed_with_errors" | "failed" = "completed",
    ) => {
      const { id } = await makeJob(slug, { kind: "agent_run", queue: Q, total: 1, softMs: 60_000, hardMs: 90_000 });
      await db().job.update({
        where: { id },
        data: { status, finishedAt: new Date(now.getTime() - secondsAgo * 1000) },
      });
    };
    await finished(10);
    await finished(5 * 60 + 10);
    await finished(5 * 60 + 20, "completed_with_errors");
    await finished(5 * 60 + 30, "failed"); // failed is not throughput
    await finished(30 * 60 + 5);
    await finished(2 * 3600); // outside the hour
    const before = await ofQueue(now);
    expect(before.throughput.perMinute).toHaveLength(THROUGHPUT_MINUTES);
    expect(before.throughput.perMinute[THROUGHPUT_MINUTES - 1]).toBe(1);
    expect(before.throughput.perMinute[THROUGHPUT_MINUTES - 1 - 5]).toBe(2);
    expect(before.throughput.perMinute[THROUGHPUT_MINUTES - 1 - 30]).toBe(1);
    expect(before.throughput.lastHour).toBe(4);
    expect(before.throughput.recentPerMinute).toBeCloseTo(0.3);
    expect(before.drain).toEqual({ state: "empty" });

    await queued(slug);
    await queued(slug);
    await queued(slug);
    const q = await ofQueue(now);
    // 3 waiting at 0.3 a minute: 10 min of real time, in production seconds.
    expect(q.drain.state).toBe("draining");
    expect(q.drain.state === "draining" && q.drain.seconds).toBeCloseTo(600 / env().BOUNDED_TIME_SCALE, 0);
  });

  it("says 'not draining' when jobs wait and nothing completed lately, and 'paused' for a paused queue", async () => {
    const slug = await tenant("stalled");
    await queued(slug);
    expect((await ofQueue()).drain).toEqual({ state: "not-draining" });
    await pauseQueue(Q, { username: "carol" });
    const q = await ofQueue();
    expect(q.drain).toEqual({ state: "paused" });
    expect(q.paused?.by).toBe("carol");
    expect(Date.parse(q.paused!.since)).toBeLessThanOrEqual(Date.now());
  });

  it("ranks the tenants by their waiting jobs", async () => {
    const big = await tenant("big");
    const small = await tenant("small");
    await queued(big);
    await queued(small);
    await queued(big);
    await queued(big);
    const q = await ofQueue();
    expect(q.topTenants.filter((t) => t.tenant === big || t.tenant === small)).toEqual([
      { tenant: big, waiting: 3 },
      { tenant: small, waiting: 1 },
    ]);
  });

  it("counts the worker slots of the live workers that consume the queue, and the busy ones", async () => {
    const announce = async (name: string, queues: string[], concurrency: number) => {
      const id = `queues-test:${name}`;
      presenceIds.push(id);
      await announcePresence(
        redis(),
        id,
        { host: "queues-test", pid: presenceIds.length, queues, concurrency, startedAt: new Date().toISOString() },
        60_000,
      );
    };
    const baseline = await getQueuesOverview();
    const base = baseline.queues.find((q) => q.queue === Q)!.slots;
    await announce("a", [Q, "imports"], 4);
    await announce("b", ["imports"], 8);
    await announce("c", [Q], 2);
    const o = await getQueuesOverview();
    expect(o.workers).toBe(baseline.workers + 3);
    expect(o.queues.find((q) => q.queue === Q)!.slots).toEqual({
      busy: 0,
      total: base.total + 6,
      workers: base.workers + 2,
    });
  });
});

describe("projectDrain", () => {
  it("divides the waiting jobs by the recent rate, in production seconds", () => {
    expect(projectDrain(0, 0, false, 1)).toEqual({ state: "empty" });
    expect(projectDrain(5, 0, false, 1)).toEqual({ state: "not-draining" });
    expect(projectDrain(5, 2, true, 1)).toEqual({ state: "paused" });
    expect(projectDrain(30, 2, false, 1)).toEqual({ state: "draining", seconds: 900 });
    expect(projectDrain(30, 2, false, 0.5)).toEqual({ state: "draining", seconds: 1800 });
  });
});
