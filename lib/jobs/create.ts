import { randomBytes } from "node:crypto";
import { resolveBudget } from "@/lib/budgets/budgets";
import { db, type Prisma } from "@/lib/db/client";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import type { JobStatus } from "@/lib/core/job-statuses";
import { KINDS, type JobKind, type QueueName } from "@/lib/catalog/catalog";
import { tenantPriority } from "@/lib/queues/fairness";
import { enqueueJob } from "@/lib/queues/queues";

/** 128 random bits, hex: the end user's capability to see one job, and nothing else. */
export function newProgressToken(): string {
  return randomBytes(16).toString("hex");
}

export class EnqueueFailed extends Error {
  override name = "EnqueueFailed";
}

/** An unfinished job that answers for a new one (see `onePerKey`). */
export interface OpenJob {
  id: string;
  progressToken: string;
  status: JobStatus;
}

/**
 * Creates a Job row (and whatever `extra` writes beside it, in the same transaction), then the
 * queue job, placed in line after its tenant's other open jobs in that queue (`tenantPriority`).
 * If the queue cannot take it, the row is removed again: nothing is left half-made.
 *
 * With `onePerKey`, at most one unfinished job exists per key: under a transaction-scoped
 * advisory lock on the key, an open job `findOpen` returns is answered (`existing`) instead of a
 * new one, so two requests at once give one job.
 */
export async function createJob(input: {
  kind: JobKind;
  /** One of the kind's queues; the first one by default. */
  queue?: QueueName;
  tenantSlug: string;
  total: number | null;
  params?: Prisma.InputJsonValue;
  extra?: (tx: Prisma.TransactionClient, jobId: string) => Promise<void>;
  /** The queue job's id when it is not the row's (kept on the row). */
  queueJobId?: string;
  onePerKey?: { key: string; findOpen: (tx: Prisma.TransactionClient) => Promise<OpenJob | null> };
  /** The trace the job's run continues. @defaultValue the current request's (lib/tracing) */
  traceparent?: string;
}): Promise<{ jobId: string; progressToken: string; existing?: OpenJob }> {
  const queue = input.queue ?? KINDS[input.kind].queues[0]!;
  if (!(KINDS[input.kind].queues as readonly string[]).includes(queue))
    throw new Error(`${input.kind} does not run on queue ${queue}`);
  // What the workers are configured to use; the worker that runs the job records its own
  // resolution when the attempt starts.
  const budget = resolveBudget(queue, input.kind);
  const progressToken = newProgressToken();
  const job = await db().$transaction(async (tx) => {
    if (input.onePerKey) {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${input.onePerKey.key}, 0))`;
      const open = await input.onePerKey.findOpen(tx);
      if (open) return { id: open.id, existing: open };
    }
    const tenant = { id: await ensureTenant(input.tenantSlug, tx) };
    const created = await tx.job.create({
      data: {
        kind: input.kind,
        queue,
        tenantId: tenant.id,
        total: input.total,
        params: input.params,
        budgetSoftMs: budget.softMs,
        budgetHardMs: budget.hardMs,
        budgetSource: budget.source,
        progressToken,
        queueJobId: input.queueJobId,
        events: { create: { type: "created", attempt: 0, message: "Job created and queued" } },
      },
      select: { id: true },
    });
    await input.extra?.(tx, created.id);
    return { id: created.id, tenantId: tenant.id, existing: undefined };
  });
  if (job.existing) return { jobId: job.id, progressToken: job.existing.progressToken, existing: job.existing };
  try {
    // Counted once the row is committed, so the new job counts itself: a tenant's first open job
    // in this queue gets the front of the line among fresh jobs (see lib/queues/fairness.ts).
    const priority = await tenantPriority(queue, job.tenantId);
    await withTimeout(
      enqueueJob(
        queue,
        input.kind,
        { jobId: job.id, tenantId: job.tenantId, total: input.total },
        { queueJobId: input.queueJobId, priority, traceparent: input.traceparent },
      ),
      ENQUEUE_TIMEOUT_MS,
    );
  } catch (err) {
    if (await withdrawUnqueued(job.id))
      throw new EnqueueFailed(`The job queue is unavailable: ${err instanceof Error ? err.message : String(err)}`);
    // The row is staying: it already runs (the reaper queued it meanwhile), or it could not be
    // removed (the database is away too) and the reaper queues it once the window has passed.
    // Either way the job will run, so the caller is told it started.
  }
  return { jobId: job.id, progressToken };
}

/**
 * How long a start waits for the queue to take its job before answering that it cannot (a 503
 * the caller may retry): Redis being down must not hold a request. An add that lands after the
 * answer finds its row gone, and the worker drops it (`startAttempt` finds no row to run).
 */
export const ENQUEUE_TIMEOUT_MS = 1_500;

/**
 * Real ms a committed row may legitimately go without its queue job: the priority count, the
 * enqueue (at most `ENQUEUE_TIMEOUT_MS`) and the removal of the row when the enqueue failed, with
 * room for a slow database. The reaper queues a row whose queue job is missing only after this
 * long (lib/runs/reaper.ts), so it does not race a start that is still deciding.
 */
export const CREATE_ENQUEUE_WINDOW_MS = 10_000;

async function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Removes a row whose queue job could not be added, unless it has started meanwhile (the
 * reaper queued it, a worker ran it): true when the row is gone, so nothing was saved. A removal
 * that fails leaves the row queued for the reaper, which queues it: false.
 */
async function withdrawUnqueued(jobId: string): Promise<boolean> {
  try {
    const { count } = await db().job.deleteMany({ where: { id: jobId, status: "queued", attempt: 0 } });
    return count === 1;
  } catch {
    return false;
  }
}
