import { formatCount } from "@/lib/format/number";
import { z } from "zod";
import { resolveBudget } from "@/lib/budgets/budgets";
import { db, type Prisma } from "@/lib/db/client";
import { logger } from "@/lib/log";
import type { JobKind, QueueName } from "@/lib/catalog/catalog";
import { tenantPriority } from "@/lib/queues/fairness";
import { enqueueJob, queue } from "@/lib/queues/queues";
import { newProgressToken } from "./create";
import { nounOf } from "./messages";

const log = logger("parts");

/**
 * A part of a split job: items `from + 1 … to` of the job it was split from (1-based positions
 * in that job's batch). The part reads its items from that job's upload or files; its own cursor
 * counts from 0 to `to − from`.
 */
const partSchema = z.object({
  /** The job that was split (its upload or files hold the items). */
  of: z.uuid(),
  /** 1-based number of this part, and how many parts there are. */
  index: z.number().int().min(1),
  count: z.number().int().min(2),
  from: z.number().int().min(0),
  to: z.number().int().min(1),
});
export type Part = z.infer<typeof partSchema>;

/** The part a job's params describe, or null for a job that is not a part of a split. */
export function partOf(params: Prisma.JsonValue | null | undefined): Part | null {
  if (!params || typeof params !== "object" || Array.isArray(params) || !("part" in params)) return null;
  const parsed = partSchema.safeParse(params.part);
  return parsed.success ? parsed.data : null;
}

/** The job whose stored items a run reads: its own, or those of the job it is a part of. */
export function itemSourceOf(run: { jobId: string; params: Prisma.JsonValue | null }): string {
  return partOf(run.params)?.of ?? run.jobId;
}

/**
 * What a split job keeps of its plan (`params.split`): who split it (an operator, or `auto` when
 * it was projected not to fit) and the ranges of its items, one per part. Parts run one after
 * another — each sized to fit its budget with the provider to itself, and a big file never holds
 * more than one worker slot — and each is made when the one before it has completed.
 */
const storedSplitSchema = z.object({
  by: z.string(),
  ranges: z.array(z.object({ from: z.number().int().min(0), to: z.number().int().min(1) })).min(1),
});
export type StoredSplit = z.infer<typeof storedSplitSchema>;

export function storedSplitOf(params: Prisma.JsonValue | null | undefined): StoredSplit | null {
  if (!params || typeof params !== "object" || Array.isArray(params) || !("split" in params)) return null;
  const parsed = storedSplitSchema.safeParse(params.split);
  return parsed.success ? parsed.data : null;
}

/** A job's params as a plain object to add to. */
export function paramsObject(params: Prisma.JsonValue | null | undefined): Prisma.InputJsonObject {
  return params && typeof params === "object" && !Array.isArray(params)
    ? ({ ...params } as Prisma.InputJsonObject)
    : {};
}

/** A part made (not yet queued). */
export interface MadePart {
  jobId: string;
  progressToken: string;
  from: number;
  to: number;
}

/** What making and queueing a part reads of the job it belongs to. */
export interface SplitJob {
  id: string;
  kind: string;
  queue: string;
  tenantId: string;
  params: Prisma.JsonValue | null;
}

/**
 * Makes part `index` (0-based) of a split job inside `tx`, which holds the job's row lock: a job
 * of its own with a fresh budget and its own progress token, reading its range of the job's
 * stored items. Items the job committed in that range before it was split (in flight when it
 * stopped) are done: the part skips them and counts only what it has left.
 */
export async function createPart(
  tx: Prisma.TransactionClient,
  job: SplitJob,
  split: StoredSplit,
  index: number,
): Promise<MadePart> {
  const range = split.ranges[index]!;
  const budget = resolveBudget(job.queue, job.kind);
  const part: Part = { of: job.id, index: index + 1, count: split.ranges.length, ...range };
  const { split: _plan, projection: _projection, ...baseParams } = paramsObject(job.params);
  const [counted] = await tx.$queryRaw<{ done: number }[]>`
    SELECT count(*)::int AS done FROM "JobItem" WHERE "jobId" = ${job.id}::uuid AND item > ${range.from}::int AND item <= ${range.to}::int`;
  const progressToken = newProgressToken();
  const child = await tx.job.create({
    data: {
      kind: job.kind,
      queue: job.queue,
      tenantId: job.tenantId,
      parentId: job.id,
      total: range.to - range.from - (counted?.done ?? 0),
      params: { ...baseParams, part },
      budgetSoftMs: budget.softMs,
      budgetHardMs: budget.hardMs,
      budgetSource: budget.source,
      progressToken,
      events: {
        create: {
          type: "created",
          attempt: 0,
          message: `Part ${index + 1} of ${split.ranges.length}: ${nounOf(job.kind)}s ${formatCount(range.from + 1)}–${formatCount(range.to)} of the job it was split from`,
        },
      },
    },
    select: { id: true },
  });
  return { jobId: child.id, progressToken, ...range };
}

/**
 * The next part of a split job whose parts so far all completed, made inside `tx` (which holds
 * the job's row lock); null when every planned part exists. Queue it after the commit.
 */
export async function nextPart(
  tx: Prisma.TransactionClient,
  job: SplitJob,
  partsSoFar: number,
): Promise<MadePart | null> {
  const split = storedSplitOf(job.params);
  if (!split || partsSoFar >= split.ranges.length) return null;
  return createPart(tx, job, split, partsSoFar);
}

/**
 * Queues a part made by `createPart`, in its tenant's line (its priority counts the open job it
 * belongs to, so other tenants' first jobs and retries go first). A part that cannot be queued is
 * removed again: the job then has no open part, and the reaper's next pass makes it anew
 * (`settleStrandedParents` → `settleParent`), so nothing waits for a human.
 */
export async function queuePart(job: Pick<SplitJob, "queue" | "kind" | "tenantId">, part: MadePart): Promise<boolean> {
  try {
    await enqueueJob(
      job.queue as QueueName,
      job.kind as JobKind,
      { jobId: part.jobId },
      { priority: await tenantPriority(job.queue as QueueName, job.tenantId) },
    );
    return true;
  } catch (err) {
    log.warn({ err, jobId: part.jobId }, "a part could not be queued; it is made again on the reaper's next pass");
    await queue(job.queue as QueueName)
      .remove(part.jobId)
      .catch(() => 0);
    await db()
      .job.delete({ where: { id: part.jobId } })
      .catch(() => undefined);
    return false;
  }
}

/**
 * Starts the part after `part` while `part` is still finishing: called once a part has dispatched
 * its last item, so the next part fills the provider while this one waits for its slowest calls
 * (a part's tail would otherwise leave the provider mostly idle, once per part). Only the latest
 * part made starts the next one, under the split job's row lock, so it is made once; the job then
 * briefly holds two worker slots. When this does not happen (a crash), `settleParent` makes the
 * next part once this one has completed.
 */
export async function startNextPartEarly(part: { parentId: string; index: number }): Promise<boolean> {
  const made = await db().$transaction(async (tx) => {
    const locked = await tx.$queryRaw<(SplitJob & { status: string })[]>`
      SELECT id::text AS id, kind, queue, "tenantId"::text AS "tenantId", params, status::text AS status
      FROM "Job" WHERE id = ${part.parentId}::uuid FOR UPDATE`;
    const parent = locked[0];
    if (parent?.status !== "running") return null;
    const partsSoFar = await tx.job.count({ where: { parentId: part.parentId } });
    if (partsSoFar !== part.index) return null;
    const next = await nextPart(tx, parent, partsSoFar);
    return next ? { parent, next } : null;
  });
  return made ? queuePart(made.parent, made.next) : false;
}
