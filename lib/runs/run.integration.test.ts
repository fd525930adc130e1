import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { ResolvedBudget } from "@/lib/budgets/budgets";
import { closeDb, db, type Prisma } from "@/lib/db/client";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { AttemptFenced } from "@/lib/core/signals";
import type { FinalRow } from "@/lib/jobs/messages";
import { progressPhrase } from "@/lib/jobs/messages";
import { startAttempt } from "./attempt";
import { commitItem } from "./commit";
import { finalizeJob, finishJob } from "./finalize";
import type { JobStatus } from "@/lib/core/job-statuses";

// Job rows are made with Prisma directly: these tests are about the fencing of runs, and need
// no queue job (nothing here touches Redis).

const tenants: string[] = [];

afterEach(async () => {
  for (const slug of tenants.splice(0)) await deleteTenant(slug);
});

afterAll(async () => {
  await closeDb();
});

async function makeJob(
  status: JobStatus = "queued",
  overrides: { kind?: string; queue?: string; budgetSource?: string } = {},
): Promise<{ jobId: string; tenantId: string }> {
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
      ...overrides,
    },
    select: { id: true },
  });
  return { jobId: job.id, tenantId: tenant.id };
}

/** The effect of one good CSV row: a Transaction for that row. */
const writeTransaction = (jobId: string, tenantId: string, row: number) => (tx: Prisma.TransactionClient) =>
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

/**
 * What `fn` returns and how many statements it sent to PostgreSQL (each is one round trip): every
 * query of the pg driver, which Prisma's adapter uses, is counted while it runs. Nothing else in
 * this file runs at the same time.
 */
async function countingRoundTrips<T>(fn: () => Promise<T>): Promise<{ value: T; roundTrips: number }> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const realQuery = proto.query;
  let roundTrips = 0;
  proto.query = function (this: unknown, ...args: unknown[]) {
    roundTrips++;
    return realQuery.apply(this, args);
  };
  try {
    return { value: await fn(), roundTrips };
  } finally {
    proto.query = realQuery;
  }
}

/** A resolver with numbers no catalog level has, so a row showing them took this worker's resolution. */
const resolveAs =
  (softMs: number, hardMs: number) =>
  (queue: string, kind: string): ResolvedBudget => ({ softMs, hardMs, why: "test", source: `test:${queue}/${kind}` });

const jobRow = (jobId: string) =>
  db().job.findUniqueOrThrow({
    where: { id: jobId },
    select: {
      status: true,
      attempt: true,
      cursor: true,
      processed: true,
      failed: true,
      message: true,
      finishedAt: true,
    },
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

    expect(run).toMatchObject({
      jobId,
      attempt: 1,
      cursor: 4,
      processed: 3,
      failed: 1,
      kind: "csv_import",
      queue: "imports",
      tenantId,
      total: 10,
    });
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

  for (const status of [
    "completed",
    "completed_with_errors",
    "timed_out",
    "killed",
    "failed",
    "abandoned",
    "cancelled",
  ] as const) {
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
    expect(
      await startAttempt("00000000-0000-4000-8000-000000000000", new Date(), resolveAs(1_000_000, 2_000_000)),
    ).toBeNull();
  });

  it("starts in one round trip with the budget this worker resolves written on the row, and the started event says it", async () => {
    const { jobId } = await makeJob();

    const { value: run, roundTrips } = await countingRoundTrips(() =>
      startAttempt(jobId, new Date(), resolveAs(1_800_000, 2_400_400)),
    );

    expect(roundTrips).toBe(1);
    expect(run).toMatchObject({
      jobId,
      attempt: 1,
      budgetSoftMs: 1_800_000,
      budgetHardMs: 2_400_400,
      budgetSource: "test:imports/csv_import",
      params: null,
      slotMsUsed: 0,
    });
    const row = await db().job.findUniqueOrThrow({ where: { id: jobId }, include: { events: true } });
    expect(row).toMatchObject({
      status: "running",
      budgetSoftMs: 1_800_000,
      budgetHardMs: 2_400_400,
      budgetSource: "test:imports/csv_import",
    });
    // Formatted in SQL as formatSeconds formats it: thousands separated, rounded to the second.
    expect(row.events.map((e) => [e.type, e.attempt, e.message])).toEqual([
      ["started", 1, "Attempt 1 started (budget 1,800 s soft, 2,400 s hard, test:imports/csv_import)"],
    ]);
  });

  it("records the attempt's start time on the row as given, in UTC", async () => {
    const { jobId } = await makeJob();
    const at = new Date("2026-03-29T01:30:00.123Z");
    await startAttempt(jobId, at, resolveAs(1_800_000, 2_400_000));
    const row = await db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect([row.startedAt, row.attemptStartedAt, row.heartbeatAt].map((d) => d?.toISOString())).toEqual(
      Array(3).fill(at.toISOString()),
    );
    const [event] = await db().jobEvent.findMany({ where: { jobId } });
    expect(event!.at.toISOString()).toBe(at.toISOString());
  });

  it("keeps a budget an operator set", async () => {
    const { jobId } = await makeJob("queued", { budgetSource: "operator:ops@example.com" });
    const run = await startAttempt(jobId, new Date(), resolveAs(1_800_000, 2_400_000));
    expect(run).toMatchObject({
      budgetSoftMs: 600_000,
      budgetHardMs: 900_000,
      budgetSource: "operator:ops@example.com",
    });
    const [event] = await db().jobEvent.findMany({ where: { jobId } });
    expect(event!.message).toBe("Attempt 1 started (budget 600 s soft, 900 s hard, operator:ops@example.com)");
  });

  it("resolves a queue and kind the catalog does not list on their own, and still writes that budget", async () => {
    const { jobId } = await makeJob("queued", { queue: "imports", kind: "not_in_the_catalog" });
    const run = await startAttempt(jobId, new Date(), resolveAs(1_800_000, 2_400_000));
    expect(run).toMatchObject({
      attempt: 1,
      kind: "not_in_the_catalog",
      budgetSource: "test:imports/not_in_the_catalog",
    });
    expect(await db().jobEvent.count({ where: { jobId, type: "started" } })).toBe(1);
  });

  it("writes nothing when the budget of the row's queue and kind cannot be resolved", async () => {
    const { jobId } = await makeJob();
    const before = await jobRow(jobId);
    const refusing = (queue: string, kind: string): ResolvedBudget => {
      if (queue === "imports") throw new Error(`no budget for ${queue}/${kind}`);
      return resolveAs(1_800_000, 2_400_000)(queue, kind);
    };

    await expect(startAttempt(jobId, new Date(), refusing)).rejects.toThrow("no budget for imports/csv_import");

    expect(await jobRow(jobId)).toEqual(before);
    expect(await db().jobEvent.count({ where: { jobId } })).toBe(0);
  });

  it("a start racing the current attempt's finish: one of them wins, never both", async () => {
    for (let i = 0; i < 10; i++) {
      const { jobId } = await makeJob();
      const first = (await startAttempt(jobId))!;

      const [finished, second] = await Promise.all([
        finishJob(jobId, first.attempt, "completed", "Imported all 10 rows."),
        startAttempt(jobId),
      ]);

      const row = await jobRow(jobId);
      if (finished) {
        expect(second).toBeNull();
        expect(row).toMatchObject({ status: "completed", attempt: first.attempt });
      } else {
        expect(second?.attempt).toBe(first.attempt + 1);
        expect(row).toMatchObject({ status: "running", attempt: first.attempt + 1, finishedAt: null });
      }
      expect(await db().jobEvent.count({ where: { jobId, type: "completed" } })).toBe(finished ? 1 : 0);
    }
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
    expect(failures.map((f) => [f.row, f.reason, f.attempt])).toEqual([
      [2, "date must look like 2026-01-31", run.attempt],
    ]);
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

    await expect(
      commitItem(jobId, first.attempt, 1, { ok: false, row: 2, reason: "amount is zero" }),
    ).rejects.toBeInstanceOf(AttemptFenced);

    expect(await db().jobItemFailure.count({ where: { jobId } })).toBe(0);
    expect(await jobRow(jobId)).toMatchObject({ cursor: 0, failed: 0 });
  });

  it("still lets the newer attempt commit after refusing the older one", async () => {
    const { jobId, tenantId } = await makeJob();
    const first = (await startAttempt(jobId))!;
    const second = (await startAttempt(jobId))!;
    await expect(
      commitItem(jobId, first.attempt, 1, { ok: true, effect: writeTransaction(jobId, tenantId, 2) }),
    ).rejects.toBeInstanceOf(AttemptFenced);

    await commitItem(jobId, second.attempt, 1, { ok: true, effect: writeTransaction(jobId, tenantId, 2) });

    expect(await db().transaction.count({ where: { jobId, row: 2 } })).toBe(1);
    expect(await jobRow(jobId)).toMatchObject({ cursor: 1, processed: 1 });
  });

  it("refuses commits after the job was finalized, even from the attempt that finalized it", async () => {
    const { jobId, tenantId } = await makeJob();
    const run = (await startAttempt(jobId))!;
    await finishJob(jobId, run.attempt, "timed_out", "Timed out after 0 of 10 rows.");

    await expect(
      commitItem(jobId, run.attempt, 1, { ok: true, effect: writeTransaction(jobId, tenantId, 2) }),
    ).rejects.toBeInstanceOf(AttemptFenced);

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

describe("finalizeJob: one statement flips the status and writes the message and its event", () => {
  const timedOut = (row: FinalRow) => `Timed out after ${progressPhrase(row)}.`;

  it("finalizes with a message given as text in one round trip: status, message and event together", async () => {
    const { jobId } = await makeJob();
    const run = (await startAttempt(jobId))!;

    const { value: status, roundTrips } = await countingRoundTrips(() =>
      finalizeJob(jobId, run.attempt, {
        status: "completed",
        message: "Imported all 10 rows.",
        from: ["running"],
        result: { rows: 10 },
      }),
    );

    expect(status).toBe("completed");
    expect(roundTrips).toBe(1);
    const row = await db().job.findUniqueOrThrow({
      where: { id: jobId },
      include: { events: { where: { type: "completed" } } },
    });
    expect(row).toMatchObject({ status: "completed", message: "Imported all 10 rows.", result: { rows: 10 } });
    expect(row.events.map((e) => [e.attempt, e.message])).toEqual([[run.attempt, "Imported all 10 rows."]]);
  });

  it("builds a message from the row the run knows in the same round trip, when the committed row is still that one", async () => {
    const { jobId } = await makeJob();
    const run = (await startAttempt(jobId))!;

    const { value: status, roundTrips } = await countingRoundTrips(() =>
      finalizeJob(jobId, run.attempt, { status: "timed_out", message: timedOut, from: ["running"], known: run }),
    );

    expect(status).toBe("timed_out");
    expect(roundTrips).toBe(1);
    expect(await jobRow(jobId)).toMatchObject({ status: "timed_out", message: "Timed out after 0 of 10 rows." });
    const events = await db().jobEvent.findMany({ where: { jobId, type: "timed_out" } });
    expect(events.map((e) => e.message)).toEqual(["Timed out after 0 of 10 rows."]);
  });

  it("builds the message from the committed counts, not from a known row they have moved past (a second statement)", async () => {
    const { jobId } = await makeJob();
    const run = (await startAttempt(jobId))!;
    await commitItem(jobId, run.attempt, 1, { ok: true, effect: async () => undefined });
    await commitItem(jobId, run.attempt, 2, { ok: false, row: 3, reason: "amount is zero" });

    const { value: status, roundTrips } = await countingRoundTrips(() =>
      finalizeJob(jobId, run.attempt, { status: "timed_out", message: timedOut, from: ["running"], known: run }),
    );

    expect(status).toBe("timed_out");
    expect(roundTrips).toBe(2);
    expect(await jobRow(jobId)).toMatchObject({ status: "timed_out", message: "Timed out after 2 of 10 rows." });
    const events = await db().jobEvent.findMany({ where: { jobId, type: "timed_out" } });
    expect(events.map((e) => e.message)).toEqual(["Timed out after 2 of 10 rows."]);
  });

  it("decides completed_with_errors from the committed failures, in the status and in the event", async () => {
    const { jobId } = await makeJob();
    const run = (await startAttempt(jobId))!;
    await commitItem(jobId, run.attempt, 1, { ok: false, row: 2, reason: "amount is zero" });

    expect(await finalizeJob(jobId, run.attempt, { status: "completed", message: "Done.", from: ["running"] })).toBe(
      "completed_with_errors",
    );

    expect(
      await db().jobEvent.findMany({
        where: { jobId, type: { not: "started" } },
        select: { type: true, message: true },
      }),
    ).toEqual([{ type: "completed_with_errors", message: "Done." }]);
  });

  it("does not finalize a stale attempt, whatever the message: no status, no message, no event", async () => {
    const { jobId } = await makeJob();
    const first = (await startAttempt(jobId))!;
    await startAttempt(jobId);

    const { value, roundTrips } = await countingRoundTrips(() =>
      finalizeJob(jobId, first.attempt, { status: "timed_out", message: timedOut, known: first }),
    );

    expect(value).toBeNull();
    expect(roundTrips).toBe(1);
    expect(await jobRow(jobId)).toMatchObject({ status: "running", message: null, finishedAt: null });
    expect(await db().jobEvent.count({ where: { jobId, type: { not: "started" } } })).toBe(0);
  });

  it("two finalizers at once: exactly one wins, and the row's message is the winner's only event", async () => {
    for (let i = 0; i < 10; i++) {
      const { jobId } = await makeJob();
      const run = (await startAttempt(jobId))!;

      const results = await Promise.all([
        finalizeJob(jobId, run.attempt, { status: "completed", message: "Imported all 10 rows.", from: ["running"] }),
        finalizeJob(jobId, run.attempt, { status: "timed_out", message: timedOut, from: ["running"], known: run }),
      ]);

      expect(results.filter((r) => r !== null)).toHaveLength(1);
      const row = await jobRow(jobId);
      expect(row.status).toBe(results.find((r) => r !== null));
      const events = await db().jobEvent.findMany({ where: { jobId, type: { not: "started" } } });
      expect(events.map((e) => [e.type, e.message])).toEqual([[row.status, row.message]]);
    }
  });

  it("the same finalization twice: the second finds the row terminal and writes nothing", async () => {
    const { jobId } = await makeJob();
    const run = (await startAttempt(jobId))!;
    const f = { status: "failed", message: "The job failed because of an internal error." } as const;

    const results = await Promise.all([finalizeJob(jobId, run.attempt, f), finalizeJob(jobId, run.attempt, f)]);

    expect(results.sort()).toEqual(["failed", null]);
    expect(await db().jobEvent.count({ where: { jobId, type: "failed" } })).toBe(1);
  });
});
