import { randomBytes } from "node:crypto";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { closeDb, db, type Prisma } from "@/lib/db/client";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { AttemptFenced } from "./errors";
import { commitItem, finishJob, startAttempt } from "./run";
import type { JobStatus } from "./statuses";

// Job rows are made with Prisma directly: these tests are about the fencing of runs, and need
// no queue job (nothing here touches Redis).

const tenants: string[] = [];

afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});

afterAll(async () => {
  await closeDb();
});

async function makeJob(status: JobStatus = "queued"): Promise<{ jobId: string; tenantId: string }> {
  const slug = uniqueTenantSlug("run");
  tenants.push(slug);
  const tenant = await db().tenant.create({ data: { slug }, select: { id: true } });
  const job = await db().job.create({
    data: {
      kind: "csv_import",
      queue: "imports",
      tenantId: tenant.id,
      status,
      total: 10,
      budgetSoftMs: 600_000,
      budgetHardMs: 900_000,
      budgetSource: "default",
      progressToken: randomBytes(16).toString("hex"),
    },
    select: { id: true },
  });
  return { jobId: job.id, tenantId: tenant.id };
}

/** The effect of one good CSV row: a Transaction for that row. */
const writeTransaction =
  (jobId: string, tenantId: string, row: number) =>
  (tx: Prisma.TransactionClient) =>
    tx.transaction.create({
      data: {
        tenantId,
        jobId,
        row,
        date: new Date("2026-01-01T00:00:00Z"),
        amountMinor: -1250n,
        currency: "EUR",
        counterparty: "Rewe",
        description: "",
        categoryId: 1,
      },
    });

const jobRow = (jobId: string) =>
  db().job.findUniqueOrThrow({
    where: { id: jobId },
    select: { status: true, attempt: true, cursor: true, processed: true, failed: true, message: true, finishedAt: true },
  });

describe("startAttempt", () => {
  it("gives two runs started at the same moment different attempt numbers", async () => {
    const { jobId } = await makeJob();
    const runs = await Promise.all([startAttempt(jobId), startAttempt(jobId), startAttempt(jobId)]);
    expect(runs.map((r) => r?.attempt).sort()).toEqual([1, 2, 3]);
    expect((await jobRow(jobId)).attempt).toBe(3);
  });

  it("raises the attempt number and marks the job running, from the job's cursor", async () => {
    const { jobId, tenantId } = await makeJob();
    await db().job.update({ where: { id: jobId }, data: { cursor: 4, processed: 3, failed: 1 } });

    const run = await startAttempt(jobId);

    expect(run).toMatchObject({ jobId, attempt: 1, cursor: 4, processed: 3, failed: 1, kind: "csv_import", queue: "imports", tenantId, total: 10 });
    const row = await db().job.findUniqueOrThrow({ where: { id: jobId }, include: { events: true } });
    expect(row.status).toBe("running");
    expect(row.attempt).toBe(1);
    expect(row.startedAt).not.toBeNull();
    expect(row.heartbeatAt).not.toBeNull();
    expect(row.events.map((e) => [e.type, e.attempt])).toEqual([["started", 1]]);
  });

  it("keeps the first start time when a later attempt starts", async () => {
    const { jobId } = await makeJob();
    await startAttempt(jobId, new Date("2026-01-01T10:00:00Z"));
    await startAttempt(jobId, new Date("2026-01-01T11:00:00Z"));
    const row = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(row.attempt).toBe(2);
    expect(row.startedAt?.toISOString()).toBe("2026-01-01T10:00:00.000Z");
  });

  for (const status of ["completed", "completed_with_errors", "timed_out", "killed", "failed", "abandoned", "cancelled"] as const) {
    it(`does not start a job that is already ${status}, and leaves its row untouched`, async () => {
      const { jobId } = await makeJob(status);
      const before = await jobRow(jobId);

      expect(await startAttempt(jobId)).toBeNull();

      expect(await jobRow(jobId)).toEqual(before);
      expect(await db().jobEvent.count({ where: { jobId } })).toBe(0);
    });
  }

  it("returns null for a job that does not exist", async () => {
    expect(await startAttempt("00000000-0000-4000-8000-000000000000")).toBeNull();
  });
});

describe("commitItem: an item's effect and the job's advance commit together, fenced by the attempt", () => {
  it("writes the effect and advances processed, cursor and heartbeat for the current attempt", async () => {
    const { jobId, tenantId } = await makeJob();
    const run = (await startAttempt(jobId))!;

    await commitItem(jobId, run.attempt, 1, { ok: true, effect: writeTransaction(jobId, tenantId, 2) });

    expect(await jobRow(jobId)).toMatchObject({ cursor: 1, processed: 1, failed: 0 });
    expect(await db().transaction.count({ where: { jobId, row: 2 } })).toBe(1);
  });

  it("records a bad item as a failure with its row and reason, and counts it as failed", async () => {
    const { jobId } = await makeJob();
    const run = (await startAttempt(jobId))!;

    await commitItem(jobId, run.attempt, 1, { ok: false, row: 2, reason: "date must look like 2026-01-31" });

    expect(await jobRow(jobId)).toMatchObject({ cursor: 1, processed: 0, failed: 1 });
    const failures = await db().jobItemFailure.findMany({ where: { jobId } });
    expect(failures.map((f) => [f.row, f.reason, f.attempt])).toEqual([[2, "date must look like 2026-01-31", run.attempt]]);
  });

  it("refuses a commit from an older attempt once a newer one started: AttemptFenced, and the effect is never run", async () => {
    const { jobId, tenantId } = await makeJob();
    const first = (await startAttempt(jobId))!;
    await commitItem(jobId, first.attempt, 1, { ok: true, effect: writeTransaction(jobId, tenantId, 2) });
    const second = (await startAttempt(jobId))!;
    expect(second.attempt).toBe(first.attempt + 1);
    expect(second.cursor).toBe(1);

    let effectRan = false;
    const zombie = commitItem(jobId, first.attempt, 2, {
      ok: true,
      effect: async (tx) => {
        effectRan = true;
        await writeTransaction(jobId, tenantId, 3)(tx);
      },
    });

    await expect(zombie).rejects.toBeInstanceOf(AttemptFenced);
    await expect(zombie).rejects.toMatchObject({ jobId, attempt: first.attempt });
    expect(effectRan).toBe(false);
    expect(await db().transaction.count({ where: { jobId } })).toBe(1);
    expect(await jobRow(jobId)).toMatchObject({ attempt: second.attempt, cursor: 1, processed: 1, failed: 0 });
  });

  it("refuses a failure record from an older attempt: no JobItemFailure row, no failed count", async () => {
    const { jobId } = await makeJob();
    const first = (await startAttempt(jobId))!;
    await startAttempt(jobId);

    await expect(commitItem(jobId, first.attempt, 1, { ok: false, row: 2, reason: "amount is zero" })).rejects.toBeInstanceOf(AttemptFenced);

    expect(await db().jobItemFailure.count({ where: { jobId } })).toBe(0);
    expect(await jobRow(jobId)).toMatchObject({ cursor: 0, failed: 0 });
  });

  it("still lets the newer attempt commit after refusing the older one", async () => {
    const { jobId, tenantId } = await makeJob();
    const first = (await startAttempt(jobId))!;
    const second = (await startAttempt(jobId))!;
    await expect(commitItem(jobId, first.attempt, 1, { ok: true, effect: writeTransaction(jobId, tenantId, 2) })).rejects.toBeInstanceOf(AttemptFenced);

    await commitItem(jobId, second.attempt, 1, { ok: true, effect: writeTransaction(jobId, tenantId, 2) });

    expect(await db().transaction.count({ where: { jobId, row: 2 } })).toBe(1);
    expect(await jobRow(jobId)).toMatchObject({ cursor: 1, processed: 1 });
  });

  it("refuses commits after the job was finalized, even from the attempt that finalized it", async () => {
    const { jobId, tenantId } = await makeJob();
    const run = (await startAttempt(jobId))!;
    await finishJob(jobId, run.attempt, "timed_out", "Timed out after 0 of 10 rows.");

    await expect(commitItem(jobId, run.attempt, 1, { ok: true, effect: writeTransaction(jobId, tenantId, 2) })).rejects.toBeInstanceOf(AttemptFenced);

    expect(await db().transaction.count({ where: { jobId } })).toBe(0);
    expect(await jobRow(jobId)).toMatchObject({ status: "timed_out", cursor: 0, processed: 0 });
  });

  it("rolls the job's advance back when the effect itself fails", async () => {
    const { jobId } = await makeJob();
    const run = (await startAttempt(jobId))!;

    await expect(
      commitItem(jobId, run.attempt, 1, {
        ok: true,
        effect: async () => {
          throw new Error("constraint violated");
        },
      }),
    ).rejects.toThrow("constraint violated");

    expect(await jobRow(jobId)).toMatchObject({ cursor: 0, processed: 0, failed: 0 });
  });
});

describe("finishJob", () => {
  it("ends the current attempt with a terminal status, the message a person reads, and an event", async () => {
    const { jobId } = await makeJob();
    const run = (await startAttempt(jobId))!;

    expect(await finishJob(jobId, run.attempt, "completed", "Imported all 10 rows.")).toBe(true);

    const row = await jobRow(jobId);
    expect(row).toMatchObject({ status: "completed", message: "Imported all 10 rows." });
    expect(row.finishedAt).not.toBeNull();
    const events = await db().jobEvent.findMany({ where: { jobId, type: "completed" } });
    expect(events.map((e) => [e.attempt, e.message])).toEqual([[run.attempt, "Imported all 10 rows."]]);
  });

  it("does nothing for a stale attempt: the newer run keeps the job running, no event is written", async () => {
    const { jobId } = await makeJob();
    const first = (await startAttempt(jobId))!;
    const second = (await startAttempt(jobId))!;

    expect(await finishJob(jobId, first.attempt, "failed", "The job failed because of an internal error.")).toBe(false);

    const row = await jobRow(jobId);
    expect(row).toMatchObject({ status: "running", attempt: second.attempt, message: null, finishedAt: null });
    expect(await db().jobEvent.count({ where: { jobId, type: "failed" } })).toBe(0);
  });

  it("does not overwrite a job that is already terminal", async () => {
    const { jobId } = await makeJob();
    const run = (await startAttempt(jobId))!;
    await finishJob(jobId, run.attempt, "killed", "Stopped at the hard limit.");

    expect(await finishJob(jobId, run.attempt, "completed", "Imported all 10 rows.")).toBe(false);

    expect(await jobRow(jobId)).toMatchObject({ status: "killed", message: "Stopped at the hard limit." });
  });
});
