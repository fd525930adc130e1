import { Writable } from "node:stream";
import type { Job as QueueJob } from "bullmq";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";

// The sweep's own budget (5 min) is 300 ms at the test time scale: these tests are about per-row
// isolation, not the deadline, so the queue's budget is overridden before anything is imported.

type Modules = {
  db: typeof import("@/lib/db/client");
  schedule: typeof import("@/lib/invoices/schedule");
  seed: typeof import("@/lib/invoices/seed");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  runtime: typeof import("@/lib/runs/run-job");
  sweep: typeof import("./overdue-invoices");
  tenants: typeof import("@/test/helpers/tenants");
};
let m: Modules;

beforeAll(async () => {
  vi.stubEnv("BOUNDED_BUDGET_SWEEPS_SOFT_S", "600000");
  vi.stubEnv("BOUNDED_BUDGET_SWEEPS_HARD_S", "900000");
  m = {
    db: await import("@/lib/db/client"),
    schedule: await import("@/lib/invoices/schedule"),
    seed: await import("@/lib/invoices/seed"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    runtime: await import("@/lib/runs/run-job"),
    sweep: await import("./overdue-invoices"),
    tenants: await import("@/test/helpers/tenants"),
  };
});

const tenants: string[] = [];

afterEach(async () => {
  for (const slug of tenants.splice(0)) {
    await m.seed.deleteInvoices(slug);
    await m.tenants.deleteTenant(slug);
  }
});

afterAll(async () => {
  await m?.queues.closeQueues();
  await m?.redis.closeRedis();
  await m?.db.closeDb();
  vi.unstubAllEnvs();
});

/** A real pino logger whose JSON lines are kept for the test to read. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n"))
        if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const log = pino({ level: "info", formatters: { level: (label) => ({ level: label }) } }, stream);
  return { log, lines };
}

const TODAY = new Date().toISOString().slice(0, 10);
const daysAgo = (n: number) => new Date(Date.parse(`${TODAY}T00:00:00Z`) - n * 86_400_000).toISOString().slice(0, 10);

/**
 * `count` open invoices, invoice n due `count + 1 - n` days ago, so the sweep's list (oldest due
 * first) numbers them 1…count in invoice order; `poisoned` maps an invoice number to what breaks it.
 */
async function seedDue(
  label: string,
  count: number,
  poisoned: Record<number, { currency?: string; amountMinor?: number }> = {},
) {
  const tenant = m.tenants.uniqueTenantSlug(label);
  tenants.push(tenant);
  await m.seed.seedInvoices(
    tenant,
    Array.from({ length: count }, (_, i) => ({
      number: `INV-${String(i + 1).padStart(3, "0")}`,
      amountMinor: 10_000 + i,
      currency: "EUR",
      dueDate: daysAgo(count + 1 - (i + 1)),
      ...poisoned[i + 1],
    })),
  );
  return tenant;
}

async function startSweep(
  tenant: string,
  options: Partial<import("@/lib/invoices/schedule").ScheduleOverdueSweepOptions> = {},
) {
  const started = await m.schedule.scheduleOverdueSweep({ tenant, ...options });
  if (started.type === "created") await m.queues.queue("sweeps").remove(started.jobId);
  return started;
}

async function createdSweep(
  tenant: string,
  options: Partial<import("@/lib/invoices/schedule").ScheduleOverdueSweepOptions> = {},
) {
  const started = await startSweep(tenant, options);
  if (started.type !== "created") throw new Error(`no sweep created: ${started.type}`);
  return started;
}

const queueJobFor = (jobId: string) => ({ id: jobId, data: { jobId } }) as unknown as QueueJob;
const runOnce = (jobId: string, log = capturingLogger().log) =>
  m.runtime.runJob(
    { overdue_invoices: m.sweep.overdueInvoices },
    queueJobFor(jobId),
    new AbortController().signal,
    log,
  );

const jobRow = (jobId: string) =>
  m.db.db().job.findUniqueOrThrow({
    where: { id: jobId },
    select: {
      status: true,
      total: true,
      processed: true,
      failed: true,
      cursor: true,
      message: true,
      result: true,
      queue: true,
    },
  });

const invoices = (tenant: string) =>
  m.db.db().invoice.findMany({
    where: { tenant: { slug: tenant } },
    select: { number: true, status: true, overdueAt: true, reminder: true },
    orderBy: { number: "asc" },
  });

describe("overdue_invoices: one poisoned row is that row's failure, never the sweep's", () => {
  it("marks 49 of 50 due invoices overdue, records the poisoned one with its number and reason, and logs processed=49 failed=1 at warn", async () => {
    const tenant = await seedDue("poisoned", 50, { 17: { currency: "XYZ" } });
    const { jobId, total } = await createdSweep(tenant);
    expect(total).toBe(50);
    const { log, lines } = capturingLogger();

    await runOnce(jobId, log);

    expect(await jobRow(jobId)).toMatchObject({
      status: "completed_with_errors",
      queue: "sweeps",
      total: 50,
      processed: 49,
      failed: 1,
      cursor: 50,
      result: { asOf: TODAY, markedOverdue: 49, unchanged: 0 },
      message: "Marked 49 invoices overdue; 1 invoice could not be marked (see the list below).",
    });
    expect(await m.db.db().jobItemFailure.findMany({ where: { jobId }, select: { row: true, reason: true } })).toEqual([
      {
        row: 17,
        reason:
          "invoice INV-017: currency “XYZ” is not one invoices are issued in (EUR, USD, GBP, CHF, SEK, NOK, DKK, PLN, CZK, JPY, CAD, AUD)",
      },
    ]);

    const rows = await invoices(tenant);
    expect(rows.filter((r) => r.status === "overdue")).toHaveLength(49);
    expect(rows.find((r) => r.number === "INV-017")).toMatchObject({ status: "open", overdueAt: null, reminder: null });
    const first = rows.find((r) => r.number === "INV-001")!;
    expect(first.overdueAt).toBeInstanceOf(Date);
    expect(first.reminder).toBe(
      `Invoice INV-001 for 100.00 EUR was due on ${new Date(`${daysAgo(50)}T00:00:00Z`).toLocaleDateString("en-GB", { day: "numeric", month: "long", year: "numeric", timeZone: "UTC" })} ` +
        "and is 50 days overdue. Please pay it as soon as possible; if you have paid it already, please ignore this reminder.",
    );

    const summary = lines.filter((l) => l.msg === "processed=49 failed=1");
    expect(summary).toHaveLength(1);
    expect(summary[0]).toMatchObject({ level: "warn", processed: 49, failed: 1, jobId, kind: "overdue_invoices" });
  });

  it("a negative amount is refused the same way, and a later sweep touches only what is still open and due", async () => {
    const tenant = await seedDue("idempotent", 10, { 4: { amountMinor: -2_500 } });
    const first = await createdSweep(tenant);
    await runOnce(first.jobId);
    expect(
      await m.db.db().jobItemFailure.findMany({ where: { jobId: first.jobId }, select: { row: true, reason: true } }),
    ).toEqual([
      {
        row: 4,
        reason:
          "invoice INV-004: the amount is -25.00 EUR; only a positive amount can be overdue (is it a credit note?)",
      },
    ]);
    const before = await invoices(tenant);

    const second = await createdSweep(tenant);

    // Only the poisoned invoice is still open and due: the nine overdue ones are not in the list.
    expect(second.total).toBe(1);
    await runOnce(second.jobId);
    expect(await jobRow(second.jobId)).toMatchObject({ status: "completed_with_errors", processed: 0, failed: 1 });
    expect(await invoices(tenant)).toEqual(before);
  });

  it("an invoice already overdue or paid when its row comes up is left as it is", async () => {
    const tenant = await seedDue("settled", 5);
    const { jobId } = await createdSweep(tenant);
    const earlier = new Date("2026-01-01T00:00:00Z");
    await m.db.db().invoice.updateMany({
      where: { tenant: { slug: tenant }, number: "INV-002" },
      data: { status: "overdue", overdueAt: earlier, reminder: "sent by hand" },
    });
    await m.db
      .db()
      .invoice.updateMany({ where: { tenant: { slug: tenant }, number: "INV-003" }, data: { status: "paid" } });

    await runOnce(jobId);

    expect(await jobRow(jobId)).toMatchObject({
      status: "completed",
      processed: 5,
      result: { markedOverdue: 3, unchanged: 2 },
      message: "Marked 3 invoices overdue; 2 invoices needed nothing (paid or already overdue).",
    });
    const rows = await invoices(tenant);
    expect(rows.find((r) => r.number === "INV-002")).toMatchObject({
      status: "overdue",
      overdueAt: earlier,
      reminder: "sent by hand",
    });
    expect(rows.find((r) => r.number === "INV-003")).toMatchObject({ status: "paid", reminder: null });
  });

  it("works through the list stored at creation: a retry resumes at the cursor, and invoices due later wait for the next sweep", async () => {
    const tenant = await seedDue("resume", 12);
    const { jobId } = await createdSweep(tenant);
    // A new due invoice after the sweep was created, and an earlier attempt that got through 5 rows.
    await m.seed.seedInvoices(tenant, [{ number: "INV-LATE", amountMinor: 500, currency: "EUR", dueDate: daysAgo(3) }]);
    await m.db.db().job.update({ where: { id: jobId }, data: { cursor: 5, processed: 5, attempt: 1 } });

    await runOnce(jobId);

    expect(await jobRow(jobId)).toMatchObject({
      status: "completed",
      total: 12,
      processed: 12,
      cursor: 12,
      result: { markedOverdue: 7 },
    });
    const rows = await invoices(tenant);
    expect(rows.filter((r) => r.status === "overdue").map((r) => r.number)).toEqual([
      "INV-006",
      "INV-007",
      "INV-008",
      "INV-009",
      "INV-010",
      "INV-011",
      "INV-012",
    ]);
    expect(rows.find((r) => r.number === "INV-LATE")).toMatchObject({ status: "open" });
  });
});

describe("scheduleOverdueSweep", () => {
  it("keeps at most one sweep unfinished at a time, even when two start at once", async () => {
    const tenant = await seedDue("one-at-a-time", 3);

    const both = await Promise.all([startSweep(tenant), startSweep(tenant)]);

    const created = both.filter((s) => s.type === "created");
    expect(created).toHaveLength(1);
    const jobId = (created[0] as { jobId: string }).jobId;
    expect(both.find((s) => s.type !== "created")).toEqual({ type: "already_running", jobId });
    expect(await startSweep(tenant)).toEqual({ type: "already_running", jobId });
    expect(await m.db.db().job.count({ where: { kind: "overdue_invoices", tenant: { slug: tenant } } })).toBe(1);

    await runOnce(jobId);
    // Finished: the next sweep may start (nothing is due any more, so the schedule skips it).
    expect(await startSweep(tenant)).toEqual({ type: "nothing_due", asOf: TODAY });
  });

  it("a sweep started by an operator with nothing due still runs, and says so", async () => {
    const tenant = await seedDue("nothing-due", 0);
    await m.seed.seedInvoices(tenant, [{ number: "INV-FUTURE", amountMinor: 100, currency: "EUR", dueDate: TODAY }]);
    const { jobId, total } = await createdSweep(tenant, { whenNothingDue: "create" });
    expect(total).toBe(0);

    await runOnce(jobId);

    expect(await jobRow(jobId)).toMatchObject({
      status: "completed",
      total: 0,
      message: `No invoice was due before ${TODAY}.`,
    });
  });
});
