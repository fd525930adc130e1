import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Principal } from "@/lib/auth/roles";
import { startImportHarness } from "@/test/helpers/import-harness";
import { waitFor } from "@/test/helpers/wait";

// Cancel against the real database, the real queue and the runtime with the model simulator.
const operator: Principal = {
  userId: "00000000-0000-0000-0000-000000000001",
  username: "oncall",
  role: "operator",
  via: "session",
};
let h: Awaited<ReturnType<typeof startImportHarness>>;
let cancel: typeof import("./cancel");
let retry: typeof import("./retry");
let split: typeof import("./split");
let parts: typeof import("@/lib/jobs/parts");
let run: typeof import("@/lib/runs/finalize");
let cancelRequest: typeof import("@/lib/runs/cancel-request");

beforeAll(async () => {
  h = await startImportHarness();
  cancel = await import("./cancel");
  retry = await import("./retry");
  split = await import("./split");
  parts = await import("@/lib/jobs/parts");
  run = await import("@/lib/runs/finalize");
  cancelRequest = await import("@/lib/runs/cancel-request");
});
afterAll(() => h.close());

const db = () => h.m.db.db();
const imports = () => h.m.queues.queue("imports");
const row = (jobId: string) => db().job.findUniqueOrThrow({ where: { id: jobId } });

/** An import waiting in its queue, as an upload leaves it. */
async function queuedImport(rows: number): Promise<string> {
  const jobId = await h.importOf(rows, "cancel-queued");
  await h.m.queues.enqueueJob("imports", "csv_import", { jobId }, { priority: 2 });
  return jobId;
}

async function expectEveryRowOnce(jobId: string, rows: number) {
  const dupes = await db().$queryRaw<
    { row: number }[]
  >`SELECT row FROM "Transaction" WHERE "jobId" = ${jobId}::uuid GROUP BY row HAVING count(*) > 1`;
  expect(dupes).toEqual([]);
  expect(await db().transaction.count({ where: { jobId } })).toBe(rows);
}

describe("cancelJob: a job that has not started", () => {
  it("a queued job becomes cancelled, its queue job is removed, and the message and timeline say who cancelled it", async () => {
    const jobId = await queuedImport(5);
    expect(await imports().getJob(jobId)).toBeTruthy();

    const r = await cancel.cancelJob(jobId, operator, { reason: "wrong file" });

    expect(r).toMatchObject({ type: "cancelled", status: "cancelled" });
    expect(await imports().getJob(jobId)).toBeUndefined();
    const after = await row(jobId);
    expect(after).toMatchObject({ status: "cancelled", processed: 0, attempt: 0 });
    expect(after.finishedAt).not.toBeNull();
    expect(after.message).toBe("Cancelled by oncall (“wrong file”) before any row was done. Retry to run it.");
    expect(await db().jobEvent.count({ where: { jobId, type: "cancelled" } })).toBe(1);
    expect(cancel.describeCancel(r)).toMatchObject({ ok: true, status: 200 });
  });

  it("twenty concurrent cancels of one queued job: exactly one cancels, the others are refused with the reason", async () => {
    const jobId = await queuedImport(3);
    const results = await Promise.all(Array.from({ length: 20 }, () => cancel.cancelJob(jobId, operator)));
    expect(results.filter((r) => r.type === "cancelled")).toHaveLength(1);
    const refused = results.filter((r) => r.type === "not_cancellable");
    expect(refused).toHaveLength(19);
    expect(refused[0]).toMatchObject({ status: "cancelled", message: "It was already cancelled." });
    expect(await db().jobEvent.count({ where: { jobId, type: "cancelled" } })).toBe(1);
  });

  it("a worker that picks up a cancelled job's queue job anyway does not run it", async () => {
    const jobId = await queuedImport(5);
    expect(await cancel.cancelJob(jobId, operator)).toMatchObject({ type: "cancelled" });
    await h.run(jobId);
    expect(await row(jobId)).toMatchObject({ status: "cancelled", attempt: 0, processed: 0, cursor: 0 });
    expect(await db().modelCall.count({ where: { jobId } })).toBe(0);
    expect(await db().transaction.count({ where: { jobId } })).toBe(0);
  });

  it("a delayed job (waiting for a rate-limit window) is cancelled at once", async () => {
    const jobId = await queuedImport(2);
    await db().job.update({ where: { id: jobId }, data: { status: "delayed" } });
    expect(await cancel.cancelJob(jobId, operator)).toMatchObject({ type: "cancelled" });
    expect((await row(jobId)).status).toBe("cancelled");
  });

  it("refuses a job that already ended, with the reason; an unknown id is not found", async () => {
    const jobId = await h.importOf(2, "cancel-ended");
    await db().job.update({ where: { id: jobId }, data: { status: "completed" } });
    const r = await cancel.cancelJob(jobId, operator);
    expect(r).toEqual({
      type: "not_cancellable",
      status: "completed",
      message: "It already completed: there is nothing left to stop.",
    });
    expect(cancel.describeCancel(r)).toMatchObject({ ok: false, status: 409, code: "job_not_cancellable" });
    await db().job.update({ where: { id: jobId }, data: { status: "timed_out" } });
    expect(await cancel.cancelJob(jobId, operator)).toMatchObject({
      type: "not_cancellable",
      message: "It already ended (timed out): there is nothing left to stop.",
    });
    expect(await cancel.cancelJob("not-a-uuid", operator)).toEqual({ type: "not_found" });
    expect(await cancel.cancelJob("00000000-0000-4000-8000-000000000000", operator)).toEqual({ type: "not_found" });
    expect(cancel.describeCancel({ type: "not_found" })).toMatchObject({ status: 404 });
  });
});

describe("cancelJob: a running job", () => {
  it("stops a running import before its next rows, ends it cancelled with its progress kept, and a retry finishes every row exactly once", async () => {
    const total = 3000;
    const jobId = await h.importOf(total, "cancel-running");
    const running = h.run(jobId);
    // The cursor (every row below it committed) is what the kept progress is checked against.
    await waitFor(async () => (await row(jobId)).cursor >= 50, {
      timeoutMs: 20_000,
      what: "the import's cursor past row 50",
    });

    const r = await cancel.cancelJob(jobId, operator, { reason: "stop it" });
    expect(r).toMatchObject({ type: "cancelling", status: "running" });
    expect(cancel.describeCancel(r)).toMatchObject({ ok: true, status: 202 });
    const atCancel = (await row(jobId)).processed;

    // BullMQ is told the run failed for good (an unrecoverable error): it does not retry it.
    const ended = await running;
    expect(ended).toBeInstanceOf(Error);
    expect((ended as Error).name).toBe("UnrecoverableError");

    const after = await row(jobId);
    expect(after.status).toBe("cancelled");
    // Stopped before its next rows: far from the end of the file.
    expect(after.processed).toBeGreaterThanOrEqual(atCancel);
    expect(after.processed).toBeLessThan(total / 2);
    // The committed progress is kept: the cursor, the counts, and each committed row's Transaction.
    expect(after.cursor).toBeGreaterThanOrEqual(50);
    expect(await db().transaction.count({ where: { jobId } })).toBe(after.processed);
    expect(await db().jobItem.count({ where: { jobId } })).toBe(after.processed + after.failed);
    expect(after.message).toBe(
      `Cancelled by oncall (“stop it”) after ${after.processed.toLocaleString("en-US")} of 3,000 rows; the rows done are kept. Retry to continue from where it stopped.`,
    );
    const events = await db().jobEvent.findMany({
      where: { jobId, type: { in: ["cancel_requested", "cancelled"] } },
      orderBy: { id: "asc" },
    });
    expect(events.map((e) => e.type)).toEqual(["cancel_requested", "cancelled"]);

    // Nothing later writes to the row: the attempt is fenced. An absence, so a clock: a write would have landed by now.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await row(jobId)).processed).toBe(after.processed);

    const retried = await retry.retryJob(jobId, operator);
    expect(retried).toMatchObject({ type: "retried", resumesAt: after.cursor });
    await imports().remove(jobId);
    await h.run(jobId);
    expect(await row(jobId)).toMatchObject({
      status: "completed",
      processed: total,
      cursor: total,
      attempt: after.attempt + 1,
    });
    await expectEveryRowOnce(jobId, total);
  });

  it("twenty concurrent cancels of a running job make one request; the others are told it is already stopping", async () => {
    const jobId = await h.importOf(2, "cancel-running-20");
    await db().job.update({ where: { id: jobId }, data: { status: "running", attempt: 1 } });
    const results = await Promise.all(Array.from({ length: 20 }, () => cancel.cancelJob(jobId, operator)));
    expect(results.filter((r) => r.type === "cancelling")).toHaveLength(1);
    const refused = results.filter((r) => r.type === "not_cancellable");
    expect(refused).toHaveLength(19);
    expect(refused[0]).toMatchObject({
      status: "running",
      message: "It is already stopping (cancel requested by oncall): it ends before its next row.",
    });
    expect(await db().jobEvent.count({ where: { jobId, type: "cancel_requested" } })).toBe(1);
    expect(await cancelRequest.cancelAnnounced(jobId, 1)).toEqual({ by: "oncall", reason: null });
    // A retry after the job ended clears the request: a later run is not cancelled by it.
    await db().job.update({ where: { id: jobId }, data: { status: "failed" } });
    expect(await retry.retryJob(jobId, operator)).toMatchObject({ type: "retried" });
    expect(await cancelRequest.pendingCancel(jobId)).toBeNull();
    await imports().remove(jobId);
    await h.run(jobId);
    expect(await row(jobId)).toMatchObject({ status: "completed", processed: 2 });
  });

  it("a running job whose worker stopped heartbeating is cancelled at once, its progress kept", async () => {
    const jobId = await h.importOf(10, "cancel-silent");
    await db().job.update({
      where: { id: jobId },
      data: { status: "running", attempt: 1, processed: 4, cursor: 4, heartbeatAt: new Date(Date.now() - 3_600_000) },
    });
    const r = await cancel.cancelJob(jobId, operator);
    expect(r).toMatchObject({
      type: "cancelled",
      message:
        "Cancelled by oncall after 4 of 10 rows; the rows done are kept. Retry to continue from where it stopped.",
    });
    expect(await row(jobId)).toMatchObject({ status: "cancelled", cursor: 4 });
  });

  it("a request whose Redis announcement was lost still stops the run, at its next heartbeat", async () => {
    const jobId = await h.importOf(3000, "cancel-durable");
    const running = h.run(jobId);
    await waitFor(async () => (await row(jobId)).processed >= 20, {
      timeoutMs: 20_000,
      what: "the import to be under way",
    });
    expect(await cancel.cancelJob(jobId, operator)).toMatchObject({ type: "cancelling" });
    await h.m.redis.redis().del(`${process.env.BOUNDED_REDIS_PREFIX}:jobs:cancel:${jobId}`);
    await running;
    const after = await row(jobId);
    expect(after.status).toBe("cancelled");
    expect(after.processed).toBeLessThan(3000);
    expect(after.message).toMatch(/^Cancelled by oncall after /);
  });

  it("a request the running attempt did not see (it went back to the queue) ends the next attempt before it runs", async () => {
    const jobId = await h.importOf(4, "cancel-handed-back");
    await db().job.update({ where: { id: jobId }, data: { status: "running", attempt: 1 } });
    expect(await cancel.cancelJob(jobId, operator)).toMatchObject({ type: "cancelling" });
    // As a stopping worker leaves it: back to queued, at its cursor.
    expect(await run.handBack(jobId, 1)).toBe(true);
    await h.run(jobId);
    expect(await row(jobId)).toMatchObject({ status: "cancelled", processed: 0 });
    expect(await db().modelCall.count({ where: { jobId } })).toBe(0);
  });
});

describe("cancelJob: a split job", () => {
  it("cancels the job and its open parts, and a cancelled job makes no further parts", async () => {
    const jobId = await h.importOf(30, "cancel-split");
    await db().job.update({ where: { id: jobId }, data: { status: "timed_out", attempt: 1 } });
    const s = await split.splitJob(jobId, operator, { parts: 3 });
    if (s.type !== "split") throw new Error(s.type);
    const first = s.children[0]!.jobId;
    await imports().remove(first);
    await h.run(first);
    // The first part completed: the second was made and queued; a worker has just started it.
    const made = await db().job.findMany({ where: { parentId: jobId }, orderBy: { createdAt: "asc" } });
    expect(made).toHaveLength(2);
    const second = made[1]!;
    await db().job.update({ where: { id: second.id }, data: { status: "running", attempt: 1 } });

    const r = await cancel.cancelJob(jobId, operator);
    expect(r).toMatchObject({ type: "cancelled", parts: 1 });
    expect((await row(jobId)).status).toBe("cancelled");
    expect(await cancelRequest.pendingCancel(second.id)).toEqual({ by: "oncall", reason: null });

    // The running part ends without having seen its request (it finished its last row first):
    // neither its end nor its early start of the next part makes a part of a cancelled job.
    expect(await parts.startNextPartEarly({ parentId: jobId, index: 2 })).toBe(false);
    await run.finalizeJob(second.id, 1, { status: "completed", message: "done", from: ["running"] });
    expect(await run.settleParent(jobId)).toBeNull();
    expect(await db().job.count({ where: { parentId: jobId } })).toBe(2);
    expect((await row(jobId)).status).toBe("cancelled");
    await imports().remove(second.id);
  });

  it("cancelling a split job cancels a queued part, whose queue job goes", async () => {
    const jobId = await h.importOf(30, "cancel-split-queued");
    await db().job.update({ where: { id: jobId }, data: { status: "timed_out", attempt: 1 } });
    const s = await split.splitJob(jobId, operator, { parts: 2 });
    if (s.type !== "split") throw new Error(s.type);
    const first = s.children[0]!.jobId;
    expect(await cancel.cancelJob(jobId, operator)).toMatchObject({ type: "cancelled", parts: 1 });
    expect((await row(first)).status).toBe("cancelled");
    expect(await imports().getJob(first)).toBeUndefined();
    expect(await db().job.count({ where: { parentId: jobId } })).toBe(1);
    // Retrying the part reopens the job; it goes on where it stopped.
    expect(await retry.retryJob(first, operator)).toMatchObject({ type: "retried" });
    expect((await row(jobId)).status).toBe("running");
    await imports().remove(first);
    await h.run(first);
    expect(await db().job.count({ where: { parentId: jobId } })).toBe(2);
  });
});
