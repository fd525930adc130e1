import { randomBytes, randomUUID } from "node:crypto";
import { Worker } from "bullmq";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { closeDb, db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { pauseQueue, resumeQueue } from "@/lib/queues/pause";
import { closeQueues, queue } from "@/lib/queues/queues";
import { closeRedis, createRedis } from "@/lib/redis/client";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { makeJob } from "@/test/helpers/jobs";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { crashStoppedMessage } from "@/lib/runs/crash-resume";
import { getCustomerProgress } from "@/lib/progress/customer-progress";
import {
  markStuckJobsFailed,
  markStuckJobsHandled,
  retryStuckJobs,
  runStuckAction,
  STUCK_ACTION_CAP,
} from "@/lib/actions/mark-failed";
import { describeStuckAction } from "@/lib/actions/stuck-messages";
import { getStuckOverview } from "./stuck-groups";
import { jobsOfCause, type StuckCause } from "@/lib/diagnosis/stuck-causes";
import { finalizeJob } from "@/lib/runs/finalize";
import type { JobStatus } from "@/lib/core/job-statuses";

const operator: Principal = {
  userId: "00000000-0000-0000-0000-000000000003",
  username: "stuck-oncall",
  role: "operator",
  via: "token",
};
const tenants: string[] = [];
const ago = (ms: number) => new Date(Date.now() - ms);
const MIN = 60_000;

beforeEach(async () => {
  // Queue jobs other suites left waiting in the test prefix would be taken first below.
  await queue("imports").drain(true);
});
afterEach(async () => {
  await resumeQueue("imports");
  await queue("imports").drain(true);
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

function tenant(label: string) {
  const slug = uniqueTenantSlug(label);
  tenants.push(slug);
  return slug;
}

/** A job row as a worker would have left it. Budgets are production ms (the tests' time scale is 0.001). */
async function row(
  slug: string,
  status: JobStatus,
  fields: {
    heartbeatAt?: Date | null;
    createdAt?: Date;
    attemptStartedAt?: Date;
    softMs?: number;
    hardMs?: number;
  } = {},
) {
  // Created a minute ago by default: a row younger than the grace may not have its queue job yet.
  const { softMs = 600_000, hardMs = 900_000, createdAt = ago(MIN), ...rest } = fields;
  const { id } = await makeJob(slug, { total: 10, softMs, hardMs });
  await db().job.update({
    where: { id },
    data: { status, attempt: status === "queued" ? 0 : 1, processed: 3, failed: 1, cursor: 4, createdAt, ...rest },
  });
  return id;
}

const addQueueJob = (id: string) => queue("imports").add("csv_import", { jobId: id }, { jobId: id });

/** Moves the queue job to active as a worker that then hangs would: taken, never finished. */
async function take(id: string) {
  const connection = createRedis("worker");
  const worker = new Worker("imports", null, { connection, prefix: env().BOUNDED_REDIS_PREFIX, autorun: false });
  const taken = await worker.getNextJob(randomUUID());
  expect(taken?.id).toBe(id);
  await worker.close(true);
  await connection.quit();
}

const causeOf = async (id: string): Promise<StuckCause | null> => {
  const { groups } = await getStuckOverview();
  return groups.find((g) => g.ids.includes(id))?.cause ?? null;
};

describe("stuck groups: each cause, produced for real", () => {
  it("lost from the queue: an open row with no queue job", async () => {
    const slug = tenant("lost");
    const queued = await row(slug, "queued", { createdAt: ago(MIN) });
    const running = await row(slug, "running", { heartbeatAt: ago(3_000), attemptStartedAt: ago(3_000) });
    expect(await causeOf(queued)).toBe("lost_from_queue");
    expect(await causeOf(running)).toBe("lost_from_queue");
    const [job] = await jobsOfCause("lost_from_queue", [queued]);
    expect(job).toMatchObject({ queueState: "unknown", why: "the row says queued, the queue has no job for it" });
  });

  it("running past the hard limit, though still heartbeating", async () => {
    const slug = tenant("hard");
    const id = await row(slug, "running", { heartbeatAt: new Date(), attemptStartedAt: ago(5_000) });
    await addQueueJob(id);
    await take(id);
    expect(await causeOf(id)).toBe("over_hard_limit");
  });

  it("heartbeat lost: running within its limits, three heartbeats missed", async () => {
    const slug = tenant("silent");
    // A long budget (hard 10 h: 36 s at the tests' scale) so only the silence is wrong.
    const id = await row(slug, "running", {
      heartbeatAt: ago(5_000),
      attemptStartedAt: ago(5_000),
      softMs: 30_000_000,
      hardMs: 36_000_000,
    });
    await addQueueJob(id);
    await take(id);
    expect(await causeOf(id)).toBe("heartbeat_lost");
    const fresh = await row(slug, "running", {
      heartbeatAt: new Date(),
      attemptStartedAt: ago(5_000),
      softMs: 30_000_000,
      hardMs: 36_000_000,
    });
    expect((await jobsOfCause("heartbeat_lost", [fresh])).length).toBe(0);
  });

  it("late start: waiting in a queue where nothing started; never late in a paused queue", async () => {
    const slug = tenant("late");
    const id = await row(slug, "queued", { createdAt: ago(10 * MIN), heartbeatAt: null });
    await addQueueJob(id);
    const before = await getStuckOverview();
    expect(before.groups.find((g) => g.cause === "late_start")!.ids).toContain(id);
    expect((await jobsOfCause("late_start", [id]))[0]!.why).toBe("nothing started on its queue in the last 15 min");

    await pauseQueue("imports", operator);
    const paused = await getStuckOverview();
    expect(paused.groups.find((g) => g.cause === "late_start")!.ids).not.toContain(id);
    expect(paused.waitingInPausedQueues).toBeGreaterThanOrEqual(1);
    expect(paused.paused.map((p) => p.queue)).toContain("imports");
  });

  it("late start: a long but moving backlog is not late; a job that later jobs overtook is", async () => {
    const slug = tenant("pace");
    const tenantId = await ensureTenant(slug);
    const now = new Date();
    const at = (msAgo: number) => new Date(now.getTime() - msAgo);
    // 40 jobs queued 20 s ago (20,000 s of production time) that started one after another
    // since: 5 of them in the last 15 production minutes (0.9 s here).
    await db().job.createMany({
      data: Array.from({ length: 40 }, (_, i) => ({
        kind: "csv_import",
        queue: "imports",
        tenantId,
        status: "completed" as const,
        budgetSoftMs: 600_000,
        budgetHardMs: 900_000,
        budgetSource: "default",
        progressToken: randomBytes(16).toString("hex"),
        createdAt: at(20_000),
        attemptStartedAt: i < 5 ? at(100 + i * 100) : at(1_000 + i * 200),
      })),
    });
    // Queued just before those 40, which all went ahead of it.
    const starved = await row(slug, "queued", { createdAt: at(20_500), heartbeatAt: null });
    const ahead = [];
    for (let i = 0; i < 5; i++) ahead.push(await row(slug, "queued", { createdAt: at(15_000 - i), heartbeatAt: null }));
    const backOfTheLine = await row(slug, "queued", { createdAt: at(10_000), heartbeatAt: null });
    for (const id of [starved, ...ahead, backOfTheLine]) await addQueueJob(id);

    const late = (await getStuckOverview({}, now)).groups.find((g) => g.cause === "late_start")!.ids;
    // Every one waited far past its soft budget (10 min); only the one the others passed is late.
    expect(late).toContain(starved);
    for (const id of [...ahead, backOfTheLine]) expect(late).not.toContain(id);
  });

  it("awaiting an operator comes first: ended jobs only a person continues (an abandoned one, one stopped at the crash-resume bound), until a retry or a mark handled takes each out", async () => {
    const slug = tenant("awaiting");
    const end = async (
      id: string,
      status: JobStatus,
      message: string | ((r: Parameters<typeof crashStoppedMessage>[0]) => string),
    ) => {
      const { attempt } = await db().job.findUniqueOrThrow({ where: { id }, select: { attempt: true } });
      await finalizeJob(id, attempt, { status, message });
    };
    // Abandoned as an earlier reaper ended rows; failed at the bound as the reaper ends them now.
    const abandoned = await row(slug, "running", { heartbeatAt: ago(5 * MIN), attemptStartedAt: ago(5 * MIN) });
    await end(abandoned, "abandoned", "Abandoned: the queue no longer runs it.");
    const atBound = await row(slug, "running", { heartbeatAt: ago(5 * MIN), attemptStartedAt: ago(5 * MIN) });
    await end(atBound, "failed", crashStoppedMessage);
    // Ended by a person from this page: that person acted; it does not wait on another one.
    const marked = await row(slug, "running", { heartbeatAt: ago(5 * MIN), attemptStartedAt: ago(5 * MIN) });
    await end(marked, "failed", "Marked failed by someone from the stuck page after 0 rows (heartbeat lost).");

    const overview = await getStuckOverview();
    expect(overview.groups[0]!.cause).toBe("awaiting_operator");
    const group = overview.groups[0]!;
    expect(group.actions).toEqual(["retry", "handle"]);
    expect(group.ids).toEqual(expect.arrayContaining([abandoned, atBound]));
    expect(group.ids).not.toContain(marked);
    // Nor is its customer told that someone will continue it: the person who ended it has acted.
    const markedToken = (await db().job.findUniqueOrThrow({ where: { id: marked }, select: { progressToken: true } }))
      .progressToken;
    expect((await getCustomerProgress(markedToken))!.next).toMatch(/Our team has looked into it and closed it/);
    const shown = group.jobs.find((j) => j.id === atBound)!;
    expect(shown).toMatchObject({ endCause: "crash_bound", action: "retry", why: "Its worker died too often" });
    expect(shown.customerWaitMs).toBeGreaterThan(0);

    // Its customer is told a person continues it — true while it is in this group.
    const { progressToken } = await db().job.findUniqueOrThrow({
      where: { id: atBound },
      select: { progressToken: true },
    });
    expect((await getCustomerProgress(progressToken))!.next).toMatch(/Our team has been told and will continue it/);

    expect(await retryStuckJobs("awaiting_operator", { jobIds: [abandoned] }, operator)).toMatchObject({
      type: "done",
      done: 1,
      refused: [],
    });
    expect(
      await markStuckJobsHandled(
        "awaiting_operator",
        { jobIds: [atBound, marked], reason: "customer asked to stop" },
        operator,
      ),
    ).toMatchObject({
      type: "done",
      done: 1,
      refused: [{ jobId: marked }],
    });
    const after = (await getStuckOverview()).groups[0]!;
    expect(after.ids).not.toContain(abandoned);
    expect(after.ids).not.toContain(atBound);
    const event = await db().jobEvent.findFirstOrThrow({ where: { jobId: atBound, type: "handled" } });
    expect(event.message).toMatch(
      /^Marked handled by stuck-oncall \(its worker died too often\): customer asked to stop\./,
    );
    // Handled, nobody is asked to continue it any more: the customer is no longer told someone will.
    const told = (await getCustomerProgress(progressToken))!.next!;
    expect(told).not.toMatch(/will continue it/);
    expect(told).toMatch(/Our team has looked into it and closed it: nothing more will be done with it\./);
    // A second mark finds nothing waiting: nothing is written twice.
    expect(await markStuckJobsHandled("awaiting_operator", { jobIds: [atBound] }, operator)).toMatchObject({
      done: 0,
      refused: [{ jobId: atBound }],
    });
    expect(await db().jobEvent.count({ where: { jobId: atBound, type: "handled" } })).toBe(1);
    // The row keeps when it was marked (what the page's index reads), the event's time.
    const handledRow = await db().job.findUniqueOrThrow({ where: { id: atBound }, select: { handledAt: true } });
    expect(handledRow.handledAt).toEqual(event.at);
    // Reopened and ended again after the mark: it waits on a person again.
    await db().job.update({ where: { id: atBound }, data: { status: "running", finishedAt: null } });
    await end(atBound, "failed", crashStoppedMessage);
    expect((await getStuckOverview()).groups[0]!.ids).toContain(atBound);
  });

  it("pages a group newest first, a bounded page at a time", async () => {
    const slug = tenant("pages");
    const ids: string[] = [];
    for (let i = 0; i < 23; i++) ids.push(await row(slug, "queued", { createdAt: ago(MIN + (23 - i) * 1000) }));
    const first = (await getStuckOverview()).groups.find((g) => g.cause === "lost_from_queue")!;
    const mine = (list: { id: string }[]) => list.map((j) => j.id).filter((id) => ids.includes(id));
    expect(first.pages).toBeGreaterThanOrEqual(2);
    expect(first.jobs.length).toBe(20);
    expect(mine(first.jobs)).toEqual(ids.slice().reverse().slice(0, mine(first.jobs).length));
    const second = (await getStuckOverview({ lost_from_queue: 2 })).groups.find((g) => g.cause === "lost_from_queue")!;
    expect(second.page).toBe(2);
    expect(new Set([...mine(first.jobs), ...mine(second.jobs)]).size).toBe(
      mine(first.jobs).length + mine(second.jobs).length,
    );
  });
});

describe("stuck groups: bulk actions", () => {
  it("marks the selected jobs of a group failed, naming who and why, atomically per job", async () => {
    const slug = tenant("fail");
    const silent = await row(slug, "running", {
      heartbeatAt: ago(5_000),
      attemptStartedAt: ago(5_000),
      softMs: 30_000_000,
      hardMs: 36_000_000,
    });
    await addQueueJob(silent);
    await take(silent);
    const healthy = await row(slug, "running", {
      heartbeatAt: new Date(),
      attemptStartedAt: new Date(),
      softMs: 30_000_000,
      hardMs: 36_000_000,
    });

    const r = await markStuckJobsFailed(
      "heartbeat_lost",
      { jobIds: [silent, healthy], reason: "worker host lost" },
      operator,
    );
    expect(r).toMatchObject({
      type: "done",
      selected: 2,
      done: 1,
      refused: [{ jobId: healthy, reason: 'It is no longer in "Heartbeat lost".' }],
    });
    const failed = await db().job.findUniqueOrThrow({ where: { id: silent }, include: { events: true } });
    expect(failed.status).toBe("failed");
    expect(failed.finishedAt).not.toBeNull();
    expect(failed.message).toBe(
      "Marked failed by stuck-oncall from the stuck page after 4 of 10 rows (heartbeat lost: three heartbeats missed): worker host lost. Retry to continue from where it stopped.",
    );
    expect(failed.events.map((e) => e.type)).toContain("failed");
    expect((await db().job.findUniqueOrThrow({ where: { id: healthy } })).status).toBe("running");
    expect(describeStuckAction(r).message).toMatch(/^Marked failed 1 of 2 jobs; 1 refused/);
  });

  it("refuses a job that changed state since it was seen, writing nothing", async () => {
    const slug = tenant("changed");
    const id = await row(slug, "queued", { createdAt: ago(MIN) });
    expect((await jobsOfCause("lost_from_queue", [id])).length).toBe(1);
    await db().job.update({ where: { id }, data: { status: "completed" } });
    const r = await markStuckJobsFailed("lost_from_queue", { jobIds: [id] }, operator);
    expect(r).toMatchObject({ type: "done", done: 0, refused: [{ jobId: id }] });
    expect((await db().job.findUniqueOrThrow({ where: { id } })).status).toBe("completed");
  });

  it("an empty selection is refused with a 400, never taken for every job", async () => {
    const slug = tenant("empty");
    const id = await row(slug, "queued", { createdAt: ago(MIN) });
    for (const action of ["fail", "retry"] as const) {
      const r = await runStuckAction(
        action,
        action === "fail" ? "lost_from_queue" : "awaiting_operator",
        { jobIds: [] },
        operator,
      );
      expect(r).toEqual({ type: "empty_selection" });
      expect(describeStuckAction(r)).toMatchObject({ ok: false, status: 400, code: "empty_selection" });
    }
    expect((await db().job.findUniqueOrThrow({ where: { id } })).status).toBe("queued");
  });

  it(`refuses more than ${STUCK_ACTION_CAP} jobs, an unknown group, and the other group's action`, async () => {
    const many = Array.from({ length: STUCK_ACTION_CAP + 1 }, () => randomUUID());
    const over = await markStuckJobsFailed("late_start", { jobIds: many }, operator);
    expect(over).toEqual({ type: "over_cap", count: STUCK_ACTION_CAP + 1, cap: STUCK_ACTION_CAP });
    expect(describeStuckAction(over)).toMatchObject({
      status: 422,
      message: "1,001 jobs selected; a bulk action takes at most 1,000. Act on them in parts.",
    });
    expect(
      describeStuckAction(await runStuckAction("fail", "everything", { jobIds: [randomUUID()] }, operator)).status,
    ).toBe(404);
    expect(
      describeStuckAction(await runStuckAction("fail", "awaiting_operator", { jobIds: [randomUUID()] }, operator)),
    ).toMatchObject({ status: 409, code: "wrong_action" });
    expect(
      describeStuckAction(await runStuckAction("handle", "late_start", { jobIds: [randomUUID()] }, operator)),
    ).toMatchObject({ status: 409, code: "wrong_action" });
  });
});
