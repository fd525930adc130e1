import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { db, Prisma } from "@/lib/db/client";
import { nounOf } from "@/lib/jobs/messages";
import { createPart, paramsObject, queuePart, type StoredSplit } from "@/lib/jobs/parts";
import { isSplittable, storedProjection } from "@/lib/projection/projection";
import { RETRYABLE_STATUSES } from "@/lib/jobs/reopen";
import { makePlan, MAX_PARTS, MIN_PARTS, type SplitPlan } from "@/lib/projection/split-plan";
import type { JobStatus } from "@/lib/core/job-statuses";
import { detailRemovedMessage } from "@/lib/jobs/messages";
import { lockTenantOfJob, tenantBeingDeletedMessage } from "@/lib/tenants/being-deleted";

/** How many parts an operator may choose. */
export const partsSchema = z
  .number({ error: "The number of parts must be a number" })
  .int("The number of parts must be a whole number")
  .min(MIN_PARTS, `At least ${MIN_PARTS} parts`)
  .max(MAX_PARTS, `At most ${MAX_PARTS} parts`);

export const splitRequestSchema = z
  .object({
    /** How many parts; the proposal's when absent. */
    parts: z.coerce.number().pipe(partsSchema).optional(),
  })
  .strict();
export type SplitRequest = z.infer<typeof splitRequestSchema>;

export type PlanResult =
  | { type: "plan"; plan: SplitPlan }
  | { type: "not_found" }
  | { type: "not_splittable"; status: JobStatus; message: string };

export type SplitResult =
  | {
      type: "split";
      jobId: string;
      plan: SplitPlan;
      children: { jobId: string; progressToken: string; from: number; to: number }[];
      message: string;
    }
  | { type: "not_found" }
  | { type: "not_splittable"; status: JobStatus; message: string }
  | { type: "queue_unavailable"; message: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function loadForSplit(jobId: string) {
  if (!UUID.test(jobId)) return null;
  return db().job.findUnique({
    where: { id: jobId },
    select: {
      id: true,
      kind: true,
      queue: true,
      status: true,
      total: true,
      cursor: true,
      parentId: true,
      tenantId: true,
      params: true,
      detailPrunedAt: true,
      tenant: { select: { slug: true, deletingAt: true } },
      _count: { select: { children: true } },
    },
  });
}
type SplitSource = NonNullable<Awaited<ReturnType<typeof loadForSplit>>>;

function refusal(job: SplitSource): string | null {
  const noun = nounOf(job.kind);
  if (job.tenant.deletingAt) return tenantBeingDeletedMessage(job.tenant.slug, job.tenant.deletingAt);
  if (!isSplittable(job.kind))
    return `A ${job.kind} job cannot be split: its ${noun}s are not independent items stored with the job. Retry it instead.`;
  if (job.parentId) return "This job is already a part of a split job. Retry it, with a larger budget if needed.";
  if (job._count.children > 0) return "This job was already split.";
  if (job.detailPrunedAt) return `${detailRemovedMessage(job.detailPrunedAt)} Send the file again as a new import.`;
  if (!(RETRYABLE_STATUSES as readonly string[]).includes(job.status)) {
    return job.status === "completed" || job.status === "completed_with_errors"
      ? "It completed: there is nothing left to split."
      : `It is ${job.status}: only a job that ended without finishing (timed out, stopped, failed, abandoned, cancelled) is split.`;
  }
  if (job.total === null) return `Its number of ${noun}s is unknown, so it cannot be divided.`;
  if (job.total - job.cursor < MIN_PARTS)
    return `Only ${job.total - job.cursor} ${noun}${job.total - job.cursor === 1 ? "" : "s"} left: retry it instead.`;
  return null;
}

/**
 * The split proposal shown before confirming: k parts from the projection of the remaining items
 * and the soft budget × 0.7, with the arithmetic in words. The operator may choose another k.
 */
export async function planSplit(jobId: string, request: SplitRequest = {}, now = new Date()): Promise<PlanResult> {
  const job = await loadForSplit(jobId);
  if (!job) return { type: "not_found" };
  const refused = refusal(job);
  if (refused) return { type: "not_splittable", status: job.status, message: refused };
  return { type: "plan", plan: await makePlan({ ...job, total: job.total! }, request, now) };
}

/**
 * Splits the items an ended job has left into k parts (an operator's decision). The job goes
 * back to `running`: its counts follow the parts (each part's commit advances them), its
 * customer's progress page shows one job, and it ends when the last part ends. The status flips
 * in one statement (and the attempt moves on, fencing any late run), so two operators at once
 * give one split. The first part is queued now, the others each when the one before completes.
 */
export async function splitJob(
  jobId: string,
  by: Principal,
  request: SplitRequest = {},
  now = new Date(),
): Promise<SplitResult> {
  const job = await loadForSplit(jobId);
  if (!job) return { type: "not_found" };
  const refused = refusal(job);
  if (refused) return { type: "not_splittable", status: job.status, message: refused };
  const plan = await makePlan({ ...job, total: job.total! }, request, now);
  const split: StoredSplit = { by: by.username, ranges: plan.ranges };
  const message = `Split by ${by.username} into ${plan.parts} parts, run one after another (${plan.arithmetic}).`;

  const first = await db().$transaction(async (tx) => {
    // Its tenant's deletion started meanwhile: refused below, with the reason `refusal` reads.
    if (await lockTenantOfJob(tx, jobId)) return null;
    const { count } = await tx.job.updateMany({
      where: { id: jobId, status: { in: [...RETRYABLE_STATUSES] }, cursor: job.cursor, children: { none: {} } },
      data: {
        status: "running",
        attempt: { increment: 1 },
        message: null,
        finishedAt: null,
        heartbeatAt: now,
        attemptStartedAt: now,
        params: { ...paramsObject(job.params), split, projection: storedProjection(plan.projection) },
      },
    });
    if (count === 0) return null;
    const { attempt, params } = await tx.job.findUniqueOrThrow({
      where: { id: jobId },
      select: { attempt: true, params: true },
    });
    await tx.jobEvent.create({ data: { jobId, type: "split", attempt, message } });
    return createPart(tx, { ...job, params }, split, 0);
  });
  if (!first) {
    // Another operator split or retried it meanwhile.
    const current = await loadForSplit(jobId);
    if (!current) return { type: "not_found" };
    return {
      type: "not_splittable",
      status: current.status,
      message: refusal(current) ?? "It changed while the split was being prepared; look at it again.",
    };
  }
  if (!(await queuePart(job, first))) {
    // A split that cannot be queued did not happen: the job is as it was.
    await db().job.update({
      where: { id: jobId },
      data: {
        status: job.status,
        params: job.params ?? Prisma.DbNull,
        message: "Split could not be queued; nothing changed.",
      },
    });
    return {
      type: "queue_unavailable",
      message: "The job queue is unavailable; nothing changed. Try again in a minute.",
    };
  }
  return { type: "split", jobId, plan, children: [first], message };
}
