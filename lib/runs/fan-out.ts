import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { createPart, paramsObject, partOf, queuePart, storedSplitOf, type StoredSplit } from "@/lib/jobs/parts";
import { fits, isSplittable, storedProjection, type Projection } from "@/lib/projection/projection";
import { makePlan, MIN_PARTS, type SplitPlan } from "@/lib/projection/split-plan";
import type { RunStart } from "./attempt";
import { keepProjection } from "./projection-writes";

/**
 * Real ms a start may reuse the kind's measures another start of this process read: a week of
 * measurements does not move in seconds, and a worker starting many small jobs reads them once.
 */
const KIND_READING_REUSE_MS = 15_000;

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
  if (!isSplittable(run.kind) || run.parentId || run.total === null || partOf(run.params))
    return { type: "not_projected" };
  const remaining = run.total - run.cursor;
  if (remaining <= 0) return { type: "not_projected" };
  // A job that sent its rows to the batch service is never split: the batch answers them, and its
  // last moment left room to finish the rest directly within the budget (./batch-lane.ts).
  const sentToBatch = run.sentToBatch ?? (await db().jobBatch.count({ where: { jobId: run.jobId } })) > 0;
  if (sentToBatch) return { type: "not_projected" };
  const plan = await makePlan(
    { id: run.jobId, kind: run.kind, queue: run.queue, total: run.total, cursor: run.cursor },
    {},
    now,
    { reuseMs: KIND_READING_REUSE_MS, ...(run.itemBytes !== undefined ? { itemBytes: run.itemBytes } : {}) },
  );
  const params = paramsObject(run.params);
  if (fits(plan.projection, run.budgetSoftMs) || remaining < MIN_PARTS || !autoSplitEnabled()) {
    keepProjection(run.jobId, run.attempt, storedProjection(plan.projection));
    return { type: "fits", projection: plan.projection };
  }
  const split: StoredSplit = { by: "auto", ranges: plan.ranges };
  const message = `Projected not to fit its budget: ${plan.arithmetic}.`;
  const first = await db().$transaction(async (tx) => {
    // Fences this run (nothing of it commits after this) and records the plan, under the row lock.
    const { count } = await tx.job.updateMany({
      where: { id: run.jobId, attempt: run.attempt, status: "running", children: { none: {} } },
      data: {
        attempt: { increment: 1 },
        message: null,
        heartbeatAt: now,
        params: { ...params, split, projection: storedProjection(plan.projection) },
      },
    });
    if (count === 0) return null;
    await tx.jobEvent.create({ data: { jobId: run.jobId, type: "split", attempt: run.attempt + 1, message } });
    return createPart(
      tx,
      { id: run.jobId, kind: run.kind, queue: run.queue, tenantId: run.tenantId, params: { ...params, split } },
      split,
      0,
    );
  });
  if (!first) return { type: "not_projected" };
  // Not queued: no open part, and the reaper's pass makes it again (see `queuePart`).
  await queuePart({ queue: run.queue, kind: run.kind, tenantId: run.tenantId }, first);
  return { type: "split", plan, first: first.jobId };
}
