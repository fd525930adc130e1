import { formatCount } from "@/lib/format/number";
import { resolveBudget } from "@/lib/budgets/budgets";
import { formatDuration } from "@/lib/format/duration";
import type { JobKind } from "@/lib/catalog/catalog";
import { nounOf } from "@/lib/jobs/messages";
import {
  describeProjection,
  itemsPerPart,
  projectItems,
  SAFETY_FACTOR,
  type ProjectOptions,
  type Projection,
} from "./projection";

export const MIN_PARTS = 2;
export const MAX_PARTS = 50;

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

/** Sizes as even as whole items allow, the larger ones first: 10 in 3 → 4, 3, 3. */
function evenSizes(items: number, parts: number): number[] {
  const base = Math.floor(items / parts);
  return Array.from({ length: parts }, (_, i) => base + (i < items % parts ? 1 : 0));
}

/**
 * The plan for the items after `cursor`: k parts, each holding at most what finishes within 0.7
 * of the soft budget at the projected rate (lib/projection/projection.ts), so a part fits however the
 * job is divided. An operator may choose another k (2–50); the arithmetic says what that means.
 */
export async function makePlan(
  job: { id: string; kind: string; queue: string; total: number; cursor: number },
  request: { parts?: number },
  now: Date,
  options: Omit<ProjectOptions, "jobId"> = {},
): Promise<SplitPlan> {
  const kind = job.kind as JobKind;
  const noun = nounOf(kind);
  const remaining = job.total - job.cursor;
  // The job's own rows: long ones take more of a token limit than those measured (lib/projection/projection.ts).
  const projection = (await projectItems(kind, remaining, now, { ...options, jobId: job.id }))!;
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
  const each = `${parts} parts of ~${formatCount(Math.ceil(remaining / parts))} ${noun}s, one after another`;
  let arithmetic = `${describeProjection(projection)}; budget ${formatDuration(softMs)} × ${SAFETY_FACTOR} → `;
  if (request.parts !== undefined && request.parts !== suggestedParts)
    arithmetic += `${suggestedParts} parts suggested; you chose ${each}`;
  else arithmetic += each;
  if (raw > MAX_PARTS && parts === MAX_PARTS)
    arithmetic += ` (at most ${MAX_PARTS}: each part may still need longer than its budget)`;
  if (request.parts !== undefined && Math.ceil(remaining / parts) > perPart)
    arithmetic += ` — a part of ~${formatCount(Math.ceil(remaining / parts))} ${noun}s may need longer than its ${formatDuration(softMs)} budget (about ${formatCount(perPart)} fit)`;
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
