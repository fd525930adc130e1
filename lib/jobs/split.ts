import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { resolveBudget } from "@/lib/budgets/budgets";
import { formatDuration, formatDurationRounded } from "@/lib/format/duration";
import { p99FromBucket } from "@/lib/budgets/report";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { listP99Buckets } from "@/lib/modelcalls/queries";
import { enqueueJob, queue } from "@/lib/queues/queues";
import type { JobKind, QueueName } from "@/lib/queues/catalog";
import { newProgressToken } from "./create";
import type { Part } from "./parts";
import { RETRYABLE_STATUSES } from "./retry";
import { nounOf } from "./messages";
import { committedItems } from "./run";
import type { JobStatus } from "./statuses";

/** Parts are sized to fill this share of the soft budget at the per-item p99: room for a slower day. */
const SAFETY_FACTOR = 0.7;
export const MIN_PARTS = 2;
export const MAX_PARTS = 50;
/** Latencies over this many days size a split. */
const SPLIT_WINDOW_DAYS = 7;
/** Fewer calls than this in the window say too little about the tail: the kind's default is used. */
const MIN_CALLS_FOR_P99 = 50;

/**
 * The kinds whose items are independent (a row, a document) and stored with the job, so any
 * range of them can run as a job of its own; with the per-item p99 assumed when too few calls
 * were recorded, and why. Agent runs (steps depend on each other) and sweeps are not split.
 */
const SPLITTABLE: Partial<Record<JobKind, { defaultItemP99Ms: number; why: string }>> = {
  csv_import: { defaultItemP99Ms: 35_000, why: "one model call per row; 35 s is the production p99 of a model call" },
  bulk_ocr: { defaultItemP99Ms: 50_000, why: "an OCR call (p99 15 s) and a model pass (p99 35 s) per document" },
};

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
  /** Per-item p99, production ms. */
  perItemP99Ms: number;
  /** Where the p99 came from: measured over the window, or the kind's stated default. */
  p99Source: "measured" | "default";
  /** The p99's basis in words ("from 1,204 calls in the last 7 days"). */
  p99Basis: string;
  /** The soft budget each part will get (what this process resolves), production ms. */
  softMs: number;
  safetyFactor: number;
  /** remaining × per-item p99. */
  expectedMs: number;
  /** The k the arithmetic gives (clamped to 2…50 and to the items left). */
  suggestedParts: number;
  /** The k of this plan: the operator's or the suggestion. */
  parts: number;
  /** Items per part, the larger ones first ("~179"). */
  partSizes: number[];
  /** Each part's range of the job's items: positions from + 1 … to. */
  ranges: { from: number; to: number }[];
  /** "1,432 rows × 2.1 s p99 ≈ 50 min; budget 10 min × 0.7 → 8 parts of ~179 rows". */
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

/**
 * The per-item p99 of a kind over the window, production ms: for each type of call the kind
 * makes (model, OCR, tool), the p99 of one call (from the hourly rollup) × calls per item, summed.
 * Null when fewer than `MIN_CALLS_FOR_P99` calls or no finished item were recorded.
 */
async function measuredItemP99(kind: string, now = new Date()): Promise<{ perItemMs: number; calls: number; items: number } | null> {
  const since = new Date(now.getTime() - SPLIT_WINDOW_DAYS * 86_400_000).toISOString();
  const until = now.toISOString();
  const [perType, [jobs]] = await Promise.all([
    listP99Buckets([{ kind }], { since: new Date(since), until: now }),
    db().$queryRaw<{ items: number }[]>`
      SELECT coalesce(sum(processed + failed), 0)::float8 AS items FROM "Job"
      WHERE kind = ${kind} AND "parentId" IS NULL
        AND "createdAt" >= (${since}::timestamptz AT TIME ZONE 'UTC') AND "createdAt" < (${until}::timestamptz AT TIME ZONE 'UTC')`,
  ]);
  const calls = perType.reduce((s, t) => s + t.calls, 0);
  const items = jobs?.items ?? 0;
  if (calls < MIN_CALLS_FOR_P99 || items === 0) return null;
  const scale = env().BOUNDED_TIME_SCALE;
  // Recorded durations are wall-clock in a possibly scaled system; budgets are production ms.
  const perItemMs = perType.reduce((s, t) => s + (p99FromBucket(t.bucket, t.maxMs) / scale) * (t.calls / items), 0);
  return { perItemMs, calls, items };
}

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

function refusal(job: NonNullable<Awaited<ReturnType<typeof loadForSplit>>>): string | null {
  const noun = nounOf(job.kind);
  if (!SPLITTABLE[job.kind as JobKind]) return `A ${job.kind} job cannot be split: its ${noun}s are not independent items stored with the job. Retry it instead.`;
  if (job.parentId) return "This job is already a part of a split job. Retry it, with a larger budget if needed.";
  if (job._count.children > 0) return "This job was already split.";
  if (!(RETRYABLE_STATUSES as readonly string[]).includes(job.status)) {
    return job.status === "completed" || job.status === "completed_with_errors" ? "It completed: there is nothing left to split." : `It is ${job.status}: only a job that ended without finishing (timed out, stopped, failed, abandoned) is split.`;
  }
  if (job.total === null) return `Its number of ${noun}s is unknown, so it cannot be divided.`;
  if (job.total - job.cursor < MIN_PARTS) return `Only ${job.total - job.cursor} ${noun}${job.total - job.cursor === 1 ? "" : "s"} left: retry it instead.`;
  return null;
}

async function makePlan(job: NonNullable<Awaited<ReturnType<typeof loadForSplit>>>, request: SplitRequest, now: Date): Promise<SplitPlan> {
  const kind = job.kind as JobKind;
  const noun = nounOf(kind);
  const total = job.total!;
  const remaining = total - job.cursor;
  const measured = await measuredItemP99(kind, now);
  const fallback = SPLITTABLE[kind]!;
  const perItemP99Ms = measured?.perItemMs ?? fallback.defaultItemP99Ms;
  const p99Basis = measured
    ? `measured from ${n(measured.calls)} calls over ${n(measured.items)} ${noun}s in the last ${SPLIT_WINDOW_DAYS} days`
    : `default (${fallback.why}): fewer than ${MIN_CALLS_FOR_P99} calls recorded in the last ${SPLIT_WINDOW_DAYS} days`;
  const { softMs } = resolveBudget(job.queue, kind);
  const expectedMs = remaining * perItemP99Ms;
  const raw = Math.ceil(expectedMs / (softMs * SAFETY_FACTOR));
  const suggestedParts = Math.min(Math.max(raw, MIN_PARTS), MAX_PARTS, remaining);
  const parts = Math.min(request.parts ?? suggestedParts, remaining);
  const partSizes = evenSizes(remaining, parts);
  const ranges: { from: number; to: number }[] = [];
  let at = job.cursor;
  for (const size of partSizes) {
    ranges.push({ from: at, to: at + size });
    at += size;
  }
  const p99 = formatDuration(perItemP99Ms);
  const each = `${parts} parts of ~${n(Math.ceil(remaining / parts))} ${noun}s`;
  let arithmetic = `${n(remaining)} ${noun}${remaining === 1 ? "" : "s"} × ${p99} p99 ≈ ${formatDurationRounded(expectedMs)}; budget ${formatDuration(softMs)} × ${SAFETY_FACTOR} → `;
  if (request.parts !== undefined && request.parts !== suggestedParts) arithmetic += `${suggestedParts} parts suggested; you chose ${each}`;
  else arithmetic += each;
  if (raw > MAX_PARTS && parts === MAX_PARTS) arithmetic += ` (at most ${MAX_PARTS}: each part may still need longer than its budget)`;
  const perPart = Math.ceil(remaining / parts) * perItemP99Ms;
  if (request.parts !== undefined && perPart > softMs) arithmetic += ` — at p99 a part needs ≈${formatDurationRounded(perPart)}, more than its ${formatDuration(softMs)} budget`;
  return {
    jobId: job.id,
    kind,
    noun,
    done: job.cursor,
    total,
    remaining,
    perItemP99Ms,
    p99Source: measured ? "measured" : "default",
    p99Basis,
    softMs,
    safetyFactor: SAFETY_FACTOR,
    expectedMs,
    suggestedParts,
    parts,
    partSizes,
    ranges,
    arithmetic,
  };
}

/**
 * The split proposal shown before confirming: k parts from the per-item p99 of the kind over
 * the last 7 days (or the kind's stated default) and the soft budget × 0.7, with the arithmetic
 * in words. The operator may choose another k (2–50).
 */
export async function planSplit(jobId: string, request: SplitRequest = {}, now = new Date()): Promise<PlanResult> {
  const job = await loadForSplit(jobId);
  if (!job) return { type: "not_found" };
  const refused = refusal(job);
  if (refused) return { type: "not_splittable", status: job.status, message: refused };
  return { type: "plan", plan: await makePlan(job, request, now) };
}

/**
 * Splits the items a job has left into k child jobs, each with its own progress token and a
 * fresh budget, reading its range of the job's stored items. The job itself goes back to
 * `running`: its counts follow the parts (each part's commit advances them), its customer's
 * progress page shows the aggregate, and it ends when the last part ends. The status flips in one
 * statement (and the attempt moves on, fencing any late run), so two operators at once give one
 * split.
 */
export async function splitJob(jobId: string, by: Principal, request: SplitRequest = {}, now = new Date()): Promise<SplitResult> {
  const job = await loadForSplit(jobId);
  if (!job) return { type: "not_found" };
  const refused = refusal(job);
  if (refused) return { type: "not_splittable", status: job.status, message: refused };
  const plan = await makePlan(job, request, now);
  const budget = resolveBudget(job.queue, job.kind);
  const baseParams = job.params && typeof job.params === "object" && !Array.isArray(job.params) ? job.params : {};
  const message = `Split by ${by.username} into ${plan.parts} parts (${plan.arithmetic}).`;

  const children = await db().$transaction(async (tx) => {
    const { count } = await tx.job.updateMany({
      where: { id: jobId, status: { in: [...RETRYABLE_STATUSES] }, cursor: job.cursor, children: { none: {} } },
      data: { status: "running", attempt: { increment: 1 }, message, finishedAt: null, heartbeatAt: now, attemptStartedAt: now },
    });
    if (count === 0) return null;
    const { attempt } = await tx.job.findUniqueOrThrow({ where: { id: jobId }, select: { attempt: true } });
    await tx.jobEvent.create({ data: { jobId, type: "split", attempt, message } });
    const made: { jobId: string; progressToken: string; from: number; to: number }[] = [];
    // Items the job committed above its cursor (in flight when it stopped) are done: each part skips
    // those of its range, and counts only what it has left.
    const done = await committedItems(jobId, job.cursor);
    for (const [i, range] of plan.ranges.entries()) {
      const part: Part = { of: jobId, index: i + 1, count: plan.parts, ...range };
      const progressToken = newProgressToken();
      const child = await tx.job.create({
        data: {
          kind: job.kind,
          queue: job.queue,
          tenantId: job.tenantId,
          parentId: jobId,
          total: range.to - range.from - done.filter((item) => item > range.from && item <= range.to).length,
          params: { ...baseParams, part },
          budgetSoftMs: budget.softMs,
          budgetHardMs: budget.hardMs,
          budgetSource: budget.source,
          progressToken,
          events: { create: { type: "created", attempt: 0, message: `Part ${i + 1} of ${plan.parts}: ${nounOf(job.kind)}s ${n(range.from + 1)}–${n(range.to)} of the job it was split from` } },
        },
        select: { id: true },
      });
      made.push({ jobId: child.id, progressToken, ...range });
    }
    return made;
  });
  if (!children) {
    // Another operator split or retried it meanwhile.
    const current = await loadForSplit(jobId);
    if (!current) return { type: "not_found" };
    return { type: "not_splittable", status: current.status, message: refusal(current) ?? "It changed while the split was being prepared; look at it again." };
  }

  try {
    for (const c of children) await enqueueJob(job.queue as QueueName, job.kind as JobKind, { jobId: c.jobId });
  } catch (err) {
    // A split that cannot be queued did not happen: the parts go, the job is as it was.
    const ids = children.map((c) => c.jobId);
    await Promise.all(ids.map((id) => queue(job.queue as QueueName).remove(id).catch(() => 0)));
    await db().$transaction([
      db().job.deleteMany({ where: { id: { in: ids } } }),
      db().job.update({ where: { id: jobId }, data: { status: job.status, message: `Split could not be queued: ${(err as Error).message}` } }),
    ]);
    return { type: "queue_unavailable", message: "The job queue is unavailable; nothing changed. Try again in a minute." };
  }
  return { type: "split", jobId, plan, children, message };
}
