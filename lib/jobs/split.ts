import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { resolveBudget } from "@/lib/budgets/budgets";
import { db, Prisma } from "@/lib/db/client";
import { env } from "@/lib/env";
import { formatDuration } from "@/lib/format/duration";
import type { JobKind } from "@/lib/queues/catalog";
import { nounOf } from "./messages";
import { createPart, paramsObject, partOf, queuePart, storedSplitOf, type StoredSplit } from "./parts";
import { describeProjection, fits, isSplittable, itemsPerPart, projectItems, SAFETY_FACTOR, storedProjection, type Projection } from "./projection";
import { RETRYABLE_STATUSES } from "./retry";
import type { RunStart } from "./run";
import type { JobStatus } from "./statuses";

export const MIN_PARTS = 2;
export const MAX_PARTS = 50;

/** How many parts an operator may choose. */
export const partsSchema = z.number({ error: "The number of parts must be a number" }).int("The number of parts must be a whole number").min(MIN_PARTS, `At least ${MIN_PARTS} parts`).max(MAX_PARTS, `At most ${MAX_PARTS} parts`);

export const splitRequestSchema = z
  .object({
    /** How many parts; the proposal's when absent. */
    parts: z.coerce.number().pipe(partsSchema).optional(),
  })
  .strict();
export type SplitRequest = z.infer<typeof splitRequestSchema>;

export interface SplitPlan {
  jobId: string;
  kind: string;
  noun: string;
  /** Items already done (the cursor): they stay with the job. */
  done: number;
  total: number;
  /** Items the parts will process. */
  remaining: number;
  /** The remaining items projected whole: rate, tail, duration, and where the figures came from. */
  projection: Projection;
  /** The soft budget each part will get (what this process resolves), production ms. */
  softMs: number;
  safetyFactor: number;
  /** The most items a part may hold to finish within the safety share of its budget. */
  itemsPerPart: number;
  /** The k the arithmetic gives (clamped to 2…50 and to the items left). */
  suggestedParts: number;
  /** The k of this plan: the operator's or the suggestion. */
  parts: number;
  /** Items per part, the larger ones first. */
  partSizes: number[];
  /** Each part's range of the job's items: positions from + 1 … to. */
  ranges: { from: number; to: number }[];
  /** "10,000 rows at ≈ 21 rows/s (…) + 1 min for the slowest ≈ 9 min; budget 10 min × 0.7 → 2 parts of ~5,000 rows, one after another". */
  arithmetic: string;
}

export type PlanResult =
  | { type: "plan"; plan: SplitPlan }
  | { type: "not_found" }
  | { type: "not_splittable"; status: JobStatus; message: string };

export type SplitResult =
  | { type: "split"; jobId: string; plan: SplitPlan; children: { jobId: string; progressToken: string; from: number; to: number }[]; message: string }
  | { type: "not_found" }
  | { type: "not_splittable"; status: JobStatus; message: string }
  | { type: "queue_unavailable"; message: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const n = (x: number) => x.toLocaleString("en-US");

/** Sizes as even as whole items allow, the larger ones first: 10 in 3 → 4, 3, 3. */
function evenSizes(items: number, parts: number): number[] {
  const base = Math.floor(items / parts);
  return Array.from({ length: parts }, (_, i) => base + (i < items % parts ? 1 : 0));
}

async function loadForSplit(jobId: string) {
  if (!UUID.test(jobId)) return null;
  return db().job.findUnique({
    where: { id: jobId },
    select: { id: true, kind: true, queue: true, status: true, total: true, cursor: true, parentId: true, tenantId: true, params: true, _count: { select: { children: true } } },
  });
}
type SplitSource = NonNullable<Awaited<ReturnType<typeof loadForSplit>>>;

function refusal(job: SplitSource): string | null {
  const noun = nounOf(job.kind);
  if (!isSplittable(job.kind)) return `A ${job.kind} job cannot be split: its ${noun}s are not independent items stored with the job. Retry it instead.`;
  if (job.parentId) return "This job is already a part of a split job. Retry it, with a larger budget if needed.";
  if (job._count.children > 0) return "This job was already split.";
  if (!(RETRYABLE_STATUSES as readonly string[]).includes(job.status)) {
    return job.status === "completed" || job.status === "completed_with_errors" ? "It completed: there is nothing left to split." : `It is ${job.status}: only a job that ended without finishing (timed out, stopped, failed, abandoned, cancelled) is split.`;
  }
  if (job.total === null) return `Its number of ${noun}s is unknown, so it cannot be divided.`;
  if (job.total - job.cursor < MIN_PARTS) return `Only ${job.total - job.cursor} ${noun}${job.total - job.cursor === 1 ? "" : "s"} left: retry it instead.`;
  return null;
}

/**
 * The plan for the items after `cursor`: k parts, each holding at most what finishes within 0.7
 * of the soft budget at the projected rate (lib/jobs/projection.ts), so a part fits however the
 * job is divided. An operator may choose another k (2–50); the arithmetic says what that means.
 */
async function makePlan(job: { id: string; kind: string; queue: string; total: number; cursor: number }, request: SplitRequest, now: Date): Promise<SplitPlan> {
  const kind = job.kind as JobKind;
  const noun = nounOf(kind);
  const remaining = job.total - job.cursor;
  const projection = (await projectItems(kind, remaining, now))!;
  const { softMs } = resolveBudget(job.queue, kind);
  const perPart = itemsPerPart(projection, softMs);
  const raw = Math.ceil(remaining / perPart);
  const suggestedParts = Math.min(Math.max(raw, MIN_PARTS), MAX_PARTS, remaining);
  const parts = Math.min(request.parts ?? suggestedParts, remaining);
  const partSizes = evenSizes(remaining, parts);
  const ranges: { from: number; to: number }[] = [];
  let at = job.cursor;
  for (const size of partSizes) {
    ranges.push({ from: at, to: at + size });
    at += size;
  }
  const each = `${parts} parts of ~${n(Math.ceil(remaining / parts))} ${noun}s, one after another`;
  let arithmetic = `${describeProjection(projection)}; budget ${formatDuration(softMs)} × ${SAFETY_FACTOR} → `;
  if (request.parts !== undefined && request.parts !== suggestedParts) arithmetic += `${suggestedParts} parts suggested; you chose ${each}`;
  else arithmetic += each;
  if (raw > MAX_PARTS && parts === MAX_PARTS) arithmetic += ` (at most ${MAX_PARTS}: each part may still need longer than its budget)`;
  if (request.parts !== undefined && Math.ceil(remaining / parts) > perPart) arithmetic += ` — a part of ~${n(Math.ceil(remaining / parts))} ${noun}s may need longer than its ${formatDuration(softMs)} budget (about ${n(perPart)} fit)`;
  return {
    jobId: job.id,
    kind,
    noun,
    done: job.cursor,
    total: job.total,
    remaining,
    projection,
    softMs,
    safetyFactor: SAFETY_FACTOR,
    itemsPerPart: perPart,
    suggestedParts,
    parts,
    partSizes,
    ranges,
    arithmetic,
  };
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
export async function splitJob(jobId: string, by: Principal, request: SplitRequest = {}, now = new Date()): Promise<SplitResult> {
  const job = await loadForSplit(jobId);
  if (!job) return { type: "not_found" };
  const refused = refusal(job);
  if (refused) return { type: "not_splittable", status: job.status, message: refused };
  const plan = await makePlan({ ...job, total: job.total! }, request, now);
  const split: StoredSplit = { by: by.username, ranges: plan.ranges };
  const message = `Split by ${by.username} into ${plan.parts} parts, run one after another (${plan.arithmetic}).`;

  const first = await db().$transaction(async (tx) => {
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
    const { attempt, params } = await tx.job.findUniqueOrThrow({ where: { id: jobId }, select: { attempt: true, params: true } });
    await tx.jobEvent.create({ data: { jobId, type: "split", attempt, message } });
    return createPart(tx, { ...job, params }, split, 0);
  });
  if (!first) {
    // Another operator split or retried it meanwhile.
    const current = await loadForSplit(jobId);
    if (!current) return { type: "not_found" };
    return { type: "not_splittable", status: current.status, message: refusal(current) ?? "It changed while the split was being prepared; look at it again." };
  }
  if (!(await queuePart(job, first))) {
    // A split that cannot be queued did not happen: the job is as it was.
    await db().job.update({
      where: { id: jobId },
      data: { status: job.status, params: job.params ?? Prisma.DbNull, message: "Split could not be queued; nothing changed." },
    });
    return { type: "queue_unavailable", message: "The job queue is unavailable; nothing changed. Try again in a minute." };
  }
  return { type: "split", jobId, plan, children: [first], message };
}

/** Whether jobs that cannot fit their budget split themselves (`BOUNDED_AUTO_SPLIT`, on by default). */
function autoSplitEnabled(): boolean {
  return env().BOUNDED_AUTO_SPLIT;
}

export type FanOut =
  | { type: "fits"; projection: Projection }
  | { type: "split"; plan: SplitPlan; first: string }
  /** Already split: its parts do the work (a queue job of the job itself run again after a crash, say). */
  | { type: "already_split" }
  | { type: "not_projected" };

/**
 * At the start of a run: projects the items the job has left and, when they cannot fit its
 * budget, splits it into parts with no operator (the same plan an operator's split makes). The
 * run then ends: the job stays `running`, one job for its customer, and ends with its last part.
 * A job that fits keeps its projection on the row (its progress page estimates from it until it
 * has measured itself). Only a whole job is split, and only once; its parts never are.
 */
export async function fanOutIfTooBig(run: RunStart, now = new Date()): Promise<FanOut> {
  if (storedSplitOf(run.params)) return { type: "already_split" };
  if (!isSplittable(run.kind) || run.parentId || run.total === null || partOf(run.params)) return { type: "not_projected" };
  const remaining = run.total - run.cursor;
  if (remaining <= 0) return { type: "not_projected" };
  const plan = await makePlan({ id: run.jobId, kind: run.kind, queue: run.queue, total: run.total, cursor: run.cursor }, {}, now);
  const params = paramsObject(run.params);
  if (fits(plan.projection, run.budgetSoftMs) || remaining < MIN_PARTS || !autoSplitEnabled()) {
    await db().job.updateMany({ where: { id: run.jobId, attempt: run.attempt, status: "running" }, data: { params: { ...params, projection: storedProjection(plan.projection) } } });
    return { type: "fits", projection: plan.projection };
  }
  const split: StoredSplit = { by: "auto", ranges: plan.ranges };
  const message = `Projected not to fit its budget: ${plan.arithmetic}.`;
  const first = await db().$transaction(async (tx) => {
    // Fences this run (nothing of it commits after this) and records the plan, under the row lock.
    const { count } = await tx.job.updateMany({
      where: { id: run.jobId, attempt: run.attempt, status: "running", children: { none: {} } },
      data: { attempt: { increment: 1 }, message: null, heartbeatAt: now, params: { ...params, split, projection: storedProjection(plan.projection) } },
    });
    if (count === 0) return null;
    await tx.jobEvent.create({ data: { jobId: run.jobId, type: "split", attempt: run.attempt + 1, message } });
    return createPart(tx, { id: run.jobId, kind: run.kind, queue: run.queue, tenantId: run.tenantId, params: { ...params, split } }, split, 0);
  });
  if (!first) return { type: "not_projected" };
  // Not queued: no open part, and the reaper's pass makes it again (see `queuePart`).
  await queuePart({ queue: run.queue, kind: run.kind, tenantId: run.tenantId }, first);
  return { type: "split", plan, first: first.jobId };
}
