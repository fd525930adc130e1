import { z } from "zod";
import { db, type Prisma } from "@/lib/db/client";
import { env } from "@/lib/env";
import type { JobStatus } from "@/lib/core/job-statuses";

/**
 * How fast a job is going, and when it is expected to finish — measured from the job's own
 * committed items, for the person watching it.
 *
 * The rate is the items committed in the window — the last `RATE_WINDOW_MS` of real time, or, when
 * that holds enough evidence, only the later half of the time since the job's first commit (a
 * pipeline that is still filling up commits slower than it will: its first moments would pull the
 * rate down long after they are over) — over the time from the first of them to now:
 *
 *     rate = items committed after the window's first commit ÷ (now − that first commit)
 *     time left = (total − processed − failed) ÷ rate + tail
 *
 * Counted from the first commit, not from the job's start or the window's edge: an hour waiting in
 * the queue, or a pause that ended more than a window ago, is not in the interval, and a job that
 * began a moment ago is measured over its short life (the window is shorter at the start). The
 * items of that first commit are left out of the count, because the time they took is before the
 * interval; items committed together (a batch) share one commit time. Ending at now, not at the
 * last commit, lets a job that has slowed down or stopped committing show it.
 *
 * A split job's items are committed by its parts (child jobs, run one after another), which also
 * advance the job's own counts: the window counts the items of the job and of its parts, so the
 * customer's one job has one rate across its parts.
 *
 * Everything here is in the customer's real seconds, whatever `BOUNDED_TIME_SCALE` is: the page
 * shows a moment on their clock and a rate they can check against it. The projection a job
 * carries is in production seconds and is converted (production seconds = real seconds ÷ scale).
 */

/**
 * How far back the measured rate looks, in real time. A minute smooths out a long-tailed call or
 * a commit of a whole batch, and still follows a job that speeds up or slows down within a
 * minute. Not scaled by `BOUNDED_TIME_SCALE`: it is about what a person watching sees, and the page
 * asks once a real second whatever the scale.
 */
export const RATE_WINDOW_MS = 60_000;
/** Fewer committed items than this in the window say too little: no measured rate yet. */
export const MIN_ITEMS_MEASURED = 10;
/** Commits spread over less than this (one batch, a burst) say too little about a pace. */
export const MIN_SPAN_MS = 2_000;

/** Where a rate comes from: the job's own commits, or the projection it was started with. */
export type RateBasis = "measured" | "projected";

export interface ProgressRate {
  /** Items per real second. */
  perSecond: number;
  basis: RateBasis;
}

/** What is known of a job's finish; nulls are "not known" (no rate, no total, not moving). */
export interface FinishEstimate {
  rate: ProgressRate | null;
  /** Real seconds until the job is expected to finish. */
  secondsLeft: number | null;
  finishAt: Date | null;
}

/** The job row as the estimate needs it; counts are the job's own, which include its parts'. */
export interface EstimatedJob {
  id: string;
  /**
   * The status the estimate goes by. Only a running job has a rate: a queued one has not started,
   * one in *delayed* waits for a rate-limit window whose end says nothing about its pace, and a
   * finished one has nothing left.
   */
  status: JobStatus;
  total: number | null;
  processed: number;
  failed: number;
  params: Prisma.JsonValue | null;
}

const NOTHING_KNOWN: FinishEstimate = { rate: null, secondsLeft: null, finishAt: null };

/**
 * The rate and expected finish of a job at `now` (see the module's formula). One statement over
 * the window's committed items, and none for a job that is not running. Falls back to the job's
 * projection while there is too little evidence.
 */
export async function estimateFinish(job: EstimatedJob, now = new Date()): Promise<FinishEstimate> {
  return job.status === "running" ? estimateFrom(job, await measuredRate(job.id, now), now) : NOTHING_KNOWN;
}

/**
 * `estimateFinish` from a measured rate already read (`measuredRate`, which a caller may start
 * alongside its other reads): no statement of its own.
 */
export function estimateFrom(job: EstimatedJob, measured: number | null, now = new Date()): FinishEstimate {
  if (job.status !== "running") return NOTHING_KNOWN;
  const projection = projectionOf(job.params);
  const rate: ProgressRate | null =
    measured !== null
      ? { perSecond: measured, basis: "measured" }
      : projection.perSecond !== null
        ? { perSecond: projection.perSecond, basis: "projected" }
        : null;
  const secondsLeft = rate ? timeLeft(job, rate.perSecond, projection.tailSeconds) : null;
  return { rate, secondsLeft, finishAt: secondsLeft === null ? null : new Date(now.getTime() + secondsLeft * 1000) };
}

/** Real seconds to commit the remaining items at `perSecond`, plus the tail; null without a total or once every item is in. */
function timeLeft(job: EstimatedJob, perSecond: number, tailSeconds: number): number | null {
  if (job.total === null) return null;
  const remaining = job.total - job.processed - job.failed;
  if (remaining <= 0) return null;
  return remaining / perSecond + tailSeconds;
}

interface WindowRow {
  /** Items committed in the window. */
  items: number;
  /** Of them, those committed after the window's first commit. */
  after: number;
  /** From the first commit in the window to the last, and to now (ms; null: no item). */
  spanMs: number | null;
  sinceFirstMs: number | null;
}

/**
 * Items per real second over the window, or null while the window holds too little evidence.
 * `jobId IN (the job, its parts)` with `committedAt` ranges is read from the (jobId, committedAt)
 * index: the first commit of each, then the window's items — its cost follows the window, not
 * the job's size.
 */
export async function measuredRate(jobId: string, now = new Date()): Promise<number | null> {
  return rateOf(await windowOf(jobId, now, "later_half")) ?? rateOf(await windowOf(jobId, now, "whole"));
}

/** The window's commits: the whole window, or its part after the midpoint of the job's life since its first commit. */
async function windowOf(jobId: string, now: Date, span: "whole" | "later_half"): Promise<WindowRow | undefined> {
  const from = new Date(now.getTime() - RATE_WINDOW_MS).toISOString();
  const to = now.toISOString();
  const rows = await db().$queryRaw<WindowRow[]>`
    WITH ids AS (
      SELECT id FROM "Job" WHERE id = ${jobId}::uuid OR "parentId" = ${jobId}::uuid
    ), start AS (
      -- greatest() skips a null: a job with no commit yet has the whole window.
      SELECT CASE WHEN ${span} = 'later_half'
               THEN greatest(${from}::timestamptz AT TIME ZONE 'UTC', f.at + ((${to}::timestamptz AT TIME ZONE 'UTC') - f.at) / 2)
               ELSE ${from}::timestamptz AT TIME ZONE 'UTC' END AS at
      FROM (SELECT min("committedAt") AS at FROM "JobItem" WHERE "jobId" IN (SELECT id FROM ids)) f
    ), w AS (
      SELECT "committedAt" AS at FROM "JobItem"
      WHERE "jobId" IN (SELECT id FROM ids)
        AND "committedAt" >= (SELECT at FROM start)
        AND "committedAt" <= ${to}::timestamptz AT TIME ZONE 'UTC'
    ), edges AS (
      SELECT count(*)::int AS items, min(at) AS first, max(at) AS last FROM w
    )
    SELECT e.items,
           (SELECT count(*)::int FROM w WHERE w.at > e.first) AS after,
           (extract(epoch FROM e.last - e.first) * 1000)::float8 AS "spanMs",
           (extract(epoch FROM (${to}::timestamptz AT TIME ZONE 'UTC') - e.first) * 1000)::float8 AS "sinceFirstMs"
    FROM edges e`;
  return rows[0];
}

function rateOf(w: WindowRow | undefined): number | null {
  if (!w || w.items < MIN_ITEMS_MEASURED || w.spanMs === null || w.sinceFirstMs === null) return null;
  if (w.spanMs < MIN_SPAN_MS || w.after === 0) return null;
  return w.after / (w.sinceFirstMs / 1000);
}

/**
 * What a job carries of its projection (`params.projection`, production figures), read field by
 * field so that a row written before a field existed, or with one out of range, still gives what
 * it validly holds.
 */
const projectionFields = {
  /** Production items per second the job was projected to sustain. */
  itemsPerSecond: z.number().positive(),
  /** Production seconds the slowest last items add after the rest (a long-tailed outside service). */
  tailSeconds: z.number().nonnegative(),
};

/** The projection in real units: items per real second (null: none) and the tail in real seconds (0: none). */
function projectionOf(params: Prisma.JsonValue | null): { perSecond: number | null; tailSeconds: number } {
  const fields = fieldsOf(fieldsOf(params).projection);
  const itemsPerSecond = projectionFields.itemsPerSecond.safeParse(fields.itemsPerSecond);
  const tailSeconds = projectionFields.tailSeconds.safeParse(fields.tailSeconds);
  const scale = env().BOUNDED_TIME_SCALE;
  return {
    perSecond: itemsPerSecond.success ? itemsPerSecond.data / scale : null,
    tailSeconds: tailSeconds.success ? tailSeconds.data * scale : 0,
  };
}

/** A JSON value's fields, or none when it is not an object. */
function fieldsOf(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
