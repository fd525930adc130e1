import { randomBytes } from "node:crypto";
import { resolveBudget } from "@/lib/budgets/budgets";
import { db, type Prisma } from "@/lib/db/client";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { KINDS, type JobKind, type QueueName } from "@/lib/queues/catalog";
import { enqueueJob } from "@/lib/queues/queues";

/** 128 random bits, hex: the end user's capability to see one job, and nothing else. */
export function newProgressToken(): string {
  return randomBytes(16).toString("hex");
}

export class EnqueueFailed extends Error {
  override name = "EnqueueFailed";
}

/**
 * Creates a Job row (and whatever `extra` writes beside it, in the same transaction), then the
 * queue job. If the queue cannot take it, the row is removed again: nothing is left half-made.
 */
export async function createJob(input: {
  kind: JobKind;
  /** One of the kind's queues; the first one by default. */
  queue?: QueueName;
  tenantSlug: string;
  total: number | null;
  params?: Prisma.InputJsonValue;
  extra?: (tx: Prisma.TransactionClient, jobId: string) => Promise<void>;
}): Promise<{ jobId: string; progressToken: string }> {
  const queue = input.queue ?? KINDS[input.kind].queues[0]!;
  if (!(KINDS[input.kind].queues as readonly string[]).includes(queue)) throw new Error(`${input.kind} does not run on queue ${queue}`);
  // What the workers are configured to use; the worker that runs the job records its own
  // resolution when the attempt starts.
  const budget = resolveBudget(queue, input.kind);
  const progressToken = newProgressToken();
  const job = await db().$transaction(async (tx) => {
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
        events: { create: { type: "created", attempt: 0, message: "Job created and queued" } },
      },
      select: { id: true },
    });
    await input.extra?.(tx, created.id);
    return created;
  });
  try {
    await enqueueJob(queue, input.kind, { jobId: job.id });
  } catch (err) {
    await db().job.delete({ where: { id: job.id } }).catch(() => undefined);
    throw new EnqueueFailed(`The job queue is unavailable: ${err instanceof Error ? err.message : String(err)}`);
  }
  return { jobId: job.id, progressToken };
}
