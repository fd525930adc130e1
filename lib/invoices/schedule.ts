import { db, type Prisma } from "@/lib/db/client";
import { createJob } from "@/lib/jobs/create";
import { TERMINAL_STATUSES } from "@/lib/core/job-statuses";
import type { Logger } from "@/lib/log";
import { scaled } from "@/lib/time";
import { MAX_INVOICES_PER_SWEEP, type OverdueSweepParams } from "./schemas";

/** The tenant that owns sweeps over every tenant's invoices. */
const SYSTEM_TENANT = "system";

/** How often the schedule looks whether a sweep is due, in production time. */
const SWEEP_CHECK_INTERVAL_MS = 15 * 60_000;
/**
 * At most one scheduled sweep per day, in production time. Invoices become overdue by the day,
 * and an invoice the sweep could not mark (a poisoned row) stays open and due: once a day it is
 * tried again and shows up in that day's job, instead of in a new failed job every 15 minutes.
 */
const SWEEP_PERIOD_MS = 24 * 3_600_000;

export type SweepStart =
  | { type: "created"; jobId: string; progressToken: string; total: number; asOf: string }
  | { type: "already_running"; jobId: string }
  | { type: "nothing_due"; asOf: string };

export interface ScheduleOverdueSweepOptions {
  /**
   * Sweep one tenant's invoices only; the job then belongs to that tenant.
   * @defaultValue every tenant's invoices, in a job of the tenant `system`
   */
  tenant?: string;
  /** Whether a sweep with nothing to do is created (an operator asked) or skipped (the schedule). @defaultValue "skip" */
  whenNothingDue?: "skip" | "create";
  /** @defaultValue the current time */
  now?: Date;
  /** @defaultValue `MAX_INVOICES_PER_SWEEP` */
  maxInvoices?: number;
}

/** A sweep of the same owner is not finished yet; the new one was not created. */
class SweepAlreadyRunning extends Error {
  override name = "SweepAlreadyRunning";
  constructor(readonly jobId: string) {
    super(`overdue-invoice sweep ${jobId} is not finished yet`);
  }
}

/** `YYYY-MM-DD` of `now` in UTC: the sweep's day. */
function sweepDay(now: Date): string {
  return now.toISOString().slice(0, 10);
}

const unfinished = {
  kind: "overdue_invoices",
  status: { notIn: [...TERMINAL_STATUSES] },
} satisfies Prisma.JobWhereInput;

async function runningSweep(ownerSlug: string): Promise<string | null> {
  const job = await db().job.findFirst({ where: { ...unfinished, tenant: { slug: ownerSlug } }, select: { id: true } });
  return job?.id ?? null;
}

/**
 * Creates one `overdue_invoices` job over the invoices that are open and due before today (UTC),
 * selected now and stored in the job's params — unless a sweep of the same owner is still
 * unfinished (at most one at a time, enforced under a transaction-scoped advisory lock, so two
 * schedulers or an operator and a scheduler cannot both create one).
 */
export async function scheduleOverdueSweep(options: ScheduleOverdueSweepOptions = {}): Promise<SweepStart> {
  const owner = options.tenant ?? SYSTEM_TENANT;
  const asOf = sweepDay(options.now ?? new Date());

  const running = await runningSweep(owner);
  if (running) return { type: "already_running", jobId: running };

  const due = await db().invoice.findMany({
    where: {
      status: "open",
      dueDate: { lt: new Date(`${asOf}T00:00:00Z`) },
      ...(options.tenant ? { tenant: { slug: options.tenant } } : {}),
    },
    select: { id: true },
    orderBy: [{ dueDate: "asc" }, { id: "asc" }],
    take: options.maxInvoices ?? MAX_INVOICES_PER_SWEEP,
  });
  if (due.length === 0 && (options.whenNothingDue ?? "skip") === "skip") return { type: "nothing_due", asOf };

  const params: OverdueSweepParams = {
    asOf,
    invoiceIds: due.map((d) => d.id),
    ...(options.tenant ? { tenant: options.tenant } : {}),
  };
  try {
    const { jobId, progressToken } = await createJob({
      kind: "overdue_invoices",
      tenantSlug: owner,
      total: due.length,
      params,
      extra: async (tx, jobId) => {
        const { tenantId } = await tx.job.findUniqueOrThrow({ where: { id: jobId }, select: { tenantId: true } });
        // Serialises sweep creation per owner; the check below then sees any sweep committed meanwhile.
        await tx.$queryRaw`SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(hashtext(${`overdue_invoices:${tenantId}`}))) AS l`;
        const other = await tx.job.findFirst({
          where: { ...unfinished, tenantId, id: { not: jobId } },
          select: { id: true },
        });
        if (other) throw new SweepAlreadyRunning(other.id);
      },
    });
    return { type: "created", jobId, progressToken, total: due.length, asOf };
  } catch (err) {
    if (err instanceof SweepAlreadyRunning) return { type: "already_running", jobId: err.jobId };
    throw err;
  }
}

export interface OverdueSweepScheduleOptions {
  /** @defaultValue `scaled(SWEEP_CHECK_INTERVAL_MS)`, at least 1 s */
  checkEveryMs?: number;
  /** @defaultValue `scaled(SWEEP_PERIOD_MS)` */
  periodMs?: number;
}

/**
 * The nightly pass: checks at start and then every interval whether the last sweep (of the
 * `system` tenant, scheduled or started by an operator) is older than the period, and if so
 * schedules one (`scheduleOverdueSweep`; skipped when nothing is due or one is unfinished). Any
 * number of worker processes may run this: the advisory lock keeps it to one sweep at a time.
 * Returns a stop function that resolves once a check in progress has ended.
 */
export function startOverdueSweepSchedule(log: Logger, options: OverdueSweepScheduleOptions = {}): () => Promise<void> {
  const checkEveryMs = options.checkEveryMs ?? Math.max(scaled(SWEEP_CHECK_INTERVAL_MS), 1_000);
  const periodMs = options.periodMs ?? scaled(SWEEP_PERIOD_MS);
  let current: Promise<void> | null = null;
  let stopped = false;

  const check = async () => {
    const last = await db().job.findFirst({
      where: { kind: "overdue_invoices", tenant: { slug: SYSTEM_TENANT } },
      orderBy: { createdAt: "desc" },
      select: { createdAt: true },
    });
    if (last && Date.now() - last.createdAt.getTime() < periodMs) return;
    const started = await scheduleOverdueSweep();
    if (started.type === "created")
      log.info(
        { jobId: started.jobId, invoices: started.total, asOf: started.asOf },
        "overdue-invoice sweep scheduled",
      );
    else log.debug({ outcome: started.type }, "no overdue-invoice sweep scheduled");
  };
  const tick = () => {
    if (stopped || current !== null) return;
    current = check()
      .catch((err: unknown) => log.error({ err }, "overdue-invoice sweep check failed; the next one will retry"))
      .finally(() => {
        current = null;
      });
  };
  tick();
  const timer = setInterval(tick, checkEveryMs);
  return async () => {
    stopped = true;
    clearInterval(timer);
    await current;
  };
}
