import { z } from "zod";
import { resolveBudget } from "@/lib/budgets/budgets";
import { db } from "@/lib/db/client";
import type { Principal } from "@/lib/auth/roles";
import { RETRY_PRIORITY } from "@/lib/queues/fairness";
import { requeueJob } from "@/lib/queues/queues";
import type { JobKind, QueueName } from "@/lib/catalog/catalog";
import { formatSeconds } from "@/lib/format/duration";
import { countLabel, nounOf } from "@/lib/jobs/messages";
import { OPERATOR_BUDGET_PREFIX } from "@/lib/runs/attempt";
import type { JobStatus } from "@/lib/core/job-statuses";
import { reopenForRetry, RETRYABLE_STATUSES } from "@/lib/jobs/reopen";
import { detailRemovedMessage } from "@/lib/jobs/messages";
import { tenantBeingDeletedMessage } from "@/lib/tenants/being-deleted";

/** An operator may give a retry up to this many times the budget the workers resolve. */
export const MAX_BUDGET_FACTOR = 4;

export const retryRequestSchema = z
  .object({
    /** A larger soft budget for this retry, in seconds (production time). */
    budgetSoftS: z.coerce.number().positive().max(86_400).optional(),
  })
  .strict();
export type RetryRequest = z.infer<typeof retryRequestSchema>;

export type RetryResult =
  | {
      type: "retried";
      jobId: string;
      status: "queued";
      resumesAt: number;
      budgetSoftMs: number;
      budgetHardMs: number;
      message: string;
    }
  | { type: "not_found" }
  | { type: "not_retryable"; status: JobStatus; message: string }
  /** Its detail (the file, the rows done) was removed by the retention pass: nothing to resume from. */
  | { type: "detail_removed"; message: string }
  | { type: "budget_out_of_bounds"; message: string }
  /** Its tenant is being deleted: none of its jobs runs again. */
  | { type: "tenant_being_deleted"; message: string }
  | { type: "queue_unavailable"; message: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function refusalFor(status: JobStatus): string {
  if (status === "queued" || status === "running" || status === "delayed")
    return `It is ${status === "delayed" ? "waiting to resume by itself" : status}: there is nothing to retry yet.`;
  if (status === "completed") return "It completed: every item was processed.";
  if (status === "completed_with_errors")
    return "It completed; its failed items are bad input, which a retry would fail again.";
  return `A ${status} job cannot be retried.`;
}

/** The row a retry reads: its status, where it runs, how far it got and whether it was split. */
async function retryTarget(jobId: string) {
  return db().job.findUnique({
    where: { id: jobId },
    select: {
      status: true,
      kind: true,
      queue: true,
      cursor: true,
      total: true,
      parentId: true,
      queueJobId: true,
      detailPrunedAt: true,
      tenant: { select: { slug: true, deletingAt: true } },
      _count: { select: { children: true } },
    },
  });
}

type RetryTarget = NonNullable<Awaited<ReturnType<typeof retryTarget>>>;

/** Why a job cannot be retried as it stands (split into parts, or in a status a retry does not take), or null. */
function retryRefusal(job: RetryTarget): RetryResult | null {
  if (job.tenant.deletingAt)
    return { type: "tenant_being_deleted", message: tenantBeingDeletedMessage(job.tenant.slug, job.tenant.deletingAt) };
  if (job.detailPrunedAt)
    return {
      type: "detail_removed",
      message: `${detailRemovedMessage(job.detailPrunedAt)} There is nothing left to resume from: send the work again as a new job.`,
    };
  if (job._count.children > 0)
    return {
      type: "not_retryable",
      status: job.status,
      message: "This job was split into parts: retry the parts instead.",
    };
  if (!(RETRYABLE_STATUSES as readonly string[]).includes(job.status))
    return { type: "not_retryable", status: job.status, message: refusalFor(job.status) };
  return null;
}

interface RetryBudget {
  softMs: number;
  hardMs: number;
  source: string;
}

/** The retry's budget: the resolved one, or the operator's larger soft one (hard scaled alike) within bounds. */
function retryBudget(
  job: RetryTarget,
  by: Principal,
  request: RetryRequest,
): RetryBudget | { type: "budget_out_of_bounds"; message: string } {
  const resolved = resolveBudget(job.queue, job.kind);
  let softMs = resolved.softMs;
  let hardMs = resolved.hardMs;
  let source = resolved.source;
  if (request.budgetSoftS !== undefined) {
    softMs = Math.round(request.budgetSoftS * 1000);
    if (softMs < resolved.softMs || softMs > resolved.softMs * MAX_BUDGET_FACTOR) {
      return {
        type: "budget_out_of_bounds",
        message: `Choose a soft budget between ${formatSeconds(resolved.softMs)} (the current one) and ${formatSeconds(resolved.softMs * MAX_BUDGET_FACTOR)} (${MAX_BUDGET_FACTOR}×).`,
      };
    }
    hardMs = Math.round(softMs * (resolved.hardMs / resolved.softMs));
    source = `${OPERATOR_BUDGET_PREFIX}${by.username}`;
  }
  return { softMs, hardMs, source };
}

/** Puts the reopened row's queue job back; if it cannot be queued, the row goes back as it was. */
async function queueRetry(jobId: string, job: RetryTarget): Promise<RetryResult | null> {
  try {
    // The finished queue job keeps its id for a while; the retry reuses the id (one queue job per row).
    // A queue job id shared by successive rows (syncs) that now holds a newer row's job is left to
    // `enqueueJob`, which refuses the add while that run is live.
    // Before every fresh job: it already waited its turn once (lib/queues/fairness.ts).
    await requeueJob(
      job.queue as QueueName,
      job.kind as JobKind,
      { jobId },
      { queueJobId: job.queueJobId ?? jobId, priority: RETRY_PRIORITY },
    );
  } catch (err) {
    // Put the row back as it was: a retry that cannot be queued did not happen.
    await db().job.updateMany({
      where: { id: jobId, status: "queued" },
      data: { status: job.status, message: `Retry could not be queued: ${(err as Error).message}` },
    });
    return {
      type: "queue_unavailable",
      message:
        "The job queue is unavailable or the previous run is still winding down; nothing changed. Try again in a minute.",
    };
  }
  return null;
}

/**
 * Retries a job that timed out, was stopped, failed or was abandoned: it goes back to the queue
 * and resumes at its cursor (items already done are not redone), with a fresh budget or a larger
 * one the operator picks (up to 4× the resolved one), ahead of every fresh job in its queue
 * (`RETRY_PRIORITY`). The status flips in one statement, so a double click or two operators at
 * once give exactly one retry.
 */
export async function retryJob(jobId: string, by: Principal, request: RetryRequest = {}): Promise<RetryResult> {
  if (!UUID.test(jobId)) return { type: "not_found" };
  const job = await retryTarget(jobId);
  if (!job) return { type: "not_found" };
  const refusal = retryRefusal(job);
  if (refusal) return refusal;

  const budget = retryBudget(job, by, request);
  if ("type" in budget) return budget;
  const { softMs, hardMs, source } = budget;

  const noun = nounOf(job.kind);
  const message = `Retry requested by ${by.username}: resumes after ${countLabel(job.cursor, noun)} already done.`;
  const claimed = await reopenForRetry({
    jobId,
    parentId: job.parentId,
    message,
    by: by.username,
    budget: { softMs, hardMs, source },
  });
  if (!claimed) {
    const now = await db().job.findUniqueOrThrow({
      where: { id: jobId },
      select: { status: true, detailPrunedAt: true, tenant: { select: { slug: true, deletingAt: true } } },
    });
    if (now.detailPrunedAt || now.tenant.deletingAt)
      return retryRefusal({ ...job, detailPrunedAt: now.detailPrunedAt, tenant: now.tenant })!;
    return { type: "not_retryable", status: now.status, message: refusalFor(now.status) };
  }

  const unqueued = await queueRetry(jobId, job);
  if (unqueued) return unqueued;
  return {
    type: "retried",
    jobId,
    status: "queued",
    resumesAt: job.cursor,
    budgetSoftMs: softMs,
    budgetHardMs: hardMs,
    message,
  };
}
