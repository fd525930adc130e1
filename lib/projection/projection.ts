import { formatCount } from "@/lib/format/number";
import { z } from "zod";
import { p99FromBucket } from "@/lib/modelcalls/buckets";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { formatDuration, formatEstimate } from "@/lib/format/duration";
import { formatCompactRate } from "@/lib/format/rate";
import { listP99Buckets, rollupSpan } from "@/lib/modelcalls/queries";
import { itemsInFlight, kindSpec, type JobKind } from "@/lib/catalog/catalog";
import { providerLimits } from "@/lib/ratelimit/buckets";
import { providerLimiter } from "@/lib/ratelimit/provider";
import { nounOf } from "@/lib/jobs/messages";

/**
 * How long a batch job will take, projected before it starts — the arithmetic both the automatic
 * fan-out and the operator's split plan size their parts with.
 *
 * A job keeps N items in flight, so it finishes its items at N ÷ (mean time of an item) per
 * second (Little's law), unless its provider is the limit: C calls in flight of B items each,
 * every call taking its mean, and R requests a second. At that rate the last item would be done
 * one mean item after it was sent; the slowest of the last items takes up to an item's p99, so
 * the difference is added for the tail:
 *
 *     duration = items ÷ min(N ÷ item mean, C × B ÷ call mean, R × B, TPM ÷ tokens an item) + (item p99 − item mean)
 *
 * The last rate is the provider's tokens per minute (configured, or learnt from its headers) over
 * the tokens one item takes (its prompt rows, its share of each batch's fixed prompt, its answer):
 * measured for the kind, and scaled for a job by its own bytes per item against the measured
 * jobs' — so a file of long rows is projected on its tokens, not only on its calls.
 *
 * The item's figures are measured end to end — from its dispatch to its commit, waits for a
 * provider slot and writes included (type `item` of the call rollups) — so what an item really
 * costs on this system, database and all, sizes the parts; not a model call's p99 alone. Every
 * figure is in production milliseconds: recorded durations are divided by the time scale.
 */

/** Parts are sized to fill this share of the soft budget: room for a slower day. */
export const SAFETY_FACTOR = 0.7;
/**
 * A run of a splittable kind works in a slice of its budget. Past `SLICE_DISPATCH_SHARE` (just past
 * the share its parts are sized for) with items left — the provider was busier than projected:
 * other tenants' work takes its fair share — it sends nothing new; the items in flight may commit
 * until `SLICE_DRAIN_SHARE`, and those still waiting then (for a provider slot, or in a long call)
 * are let go. The rest continues in a new attempt with a fresh budget (`SliceEnded`), where it is
 * projected again and split if it still does not fit — always before the soft limit.
 */
export const SLICE_DISPATCH_SHARE = 0.75;
export const SLICE_DRAIN_SHARE = 0.9;

/** Real ms after a run's start at which its slice stops dispatching and stops waiting; undefined for a kind that is never split, or with splitting off. */
export function sliceOf(kind: string, softMsReal: number): { dispatchMs: number; drainMs: number } | undefined {
  return isSplittable(kind) && env().BOUNDED_AUTO_SPLIT
    ? { dispatchMs: SLICE_DISPATCH_SHARE * softMsReal, drainMs: SLICE_DRAIN_SHARE * softMsReal }
    : undefined;
}

/** Measurements over this many days project a job. */
export const PROJECTION_WINDOW_DAYS = 7;
/** Fewer measured items than this say too little about the tail: the kind's defaults are used. */
const MIN_ITEMS_MEASURED = 100;
/** Fewer measured calls than this: the provider's call time is the kind's default. */
const MIN_CALLS_MEASURED = 50;

interface ItemDefaults {
  /** Mean of one item end to end, production ms, when the provider is not the limit. */
  itemMeanMs: number;
  /** p99 of one item end to end, production ms. */
  itemP99Ms: number;
  /** Mean of one call to the kind's provider (one batch for batched kinds), production ms. */
  callMeanMs: number;
  /** Tokens one item takes at the model (prompt share and answer), when its provider limits tokens. */
  itemTokens: number;
  why: string;
}

/**
 * The kinds whose items are independent (a row, a document) and stored with the job, so any range
 * of them can run as a job of its own — projected, and split when they do not fit; with the
 * figures assumed until enough were measured, and why. Agent runs (steps depend on each other),
 * syncs (the marketplace names the next page) and sweeps are not split.
 */
export const SPLITTABLE: Partial<Record<JobKind, ItemDefaults>> = {
  csv_import: {
    itemMeanMs: 13_000,
    itemP99Ms: 60_000,
    callMeanMs: 12_800,
    itemTokens: 90,
    why: "a batch of 8 rows is one model call: 1.7 × a single call (median 5.5 s, p99 35 s) gives a mean of ≈ 12.8 s and a p99 of ≈ 60 s; a row of a bank export takes ≈ 80 tokens with its share of the batch's category list and its answer (bench:tokens), 90 with room for longer remittance texts",
  },
  bulk_ocr: {
    itemMeanMs: 10_000,
    itemP99Ms: 50_000,
    callMeanMs: 3_000,
    itemTokens: 1_500,
    why: "an OCR call (median 2 s, p99 15 s) and a model pass (median 5.5 s, p99 35 s) per document; its model pass reads the page's text, ≈ 1,500 tokens",
  },
};

export function isSplittable(kind: string): boolean {
  return Object.hasOwn(SPLITTABLE, kind);
}

export interface Projection {
  kind: string;
  items: number;
  /** Items in flight at once (the catalog's number, or its override). */
  inFlight: number;
  /** Production items per second the job sustains: the smallest of its own and its provider's rate. */
  itemsPerSecond: number;
  /** What limits the rate. */
  limit: "items in flight" | "provider calls in flight" | "provider request rate" | "provider tokens per minute";
  /** What the slowest of the last items adds: an item's p99 less its mean, production ms. */
  tailMs: number;
  /** items ÷ rate + tail, production ms. */
  ms: number;
  source: "measured" | "default";
  /** Where the figures came from, in words. */
  basis: string;
}

/** What a job carries of its projection (`params.projection`), for its progress page before it has measured itself. */
export const storedProjectionSchema = z.object({
  itemsPerSecond: z.number().positive(),
  tailSeconds: z.number().nonnegative(),
  ms: z.number().nonnegative(),
});
export type StoredProjection = z.infer<typeof storedProjectionSchema>;

export function storedProjection(p: Projection): StoredProjection {
  return { itemsPerSecond: p.itemsPerSecond, tailSeconds: p.tailMs / 1000, ms: p.ms };
}

interface Measured {
  items: number;
  itemMeanMs: number;
  itemP99Ms: number;
  calls: number;
  callMeanMs: number;
  /** Tokens an item took at the model (answered calls' usage ÷ the items they answered). */
  itemTokens: number;
  /** Bytes an item of the measured jobs' uploads held, to scale `itemTokens` to a job's own. */
  itemBytes: number;
}

type KindMeasures = Partial<Measured> & { items: number; calls: number; tokenItems: number };

/**
 * The kind's measured item and call figures over the window, production ms (null figures: too
 * few). Every read is of a summary kept as the work happens — the call rollups, the kind's daily
 * figures — so its cost is a week of summary rows whatever the history.
 */
async function measure(kind: string, now: Date): Promise<KindMeasures> {
  const since = new Date(now.getTime() - PROJECTION_WINDOW_DAYS * 86_400_000);
  const provider = kindSpec(kind)?.provider;
  const callType = provider === "ocr" ? "ocr" : "model";
  const [sums, p99, [figures]] = await Promise.all([
    db().$queryRaw<{ type: string; n: number; total: number }[]>`
      SELECT type::text AS type, sum(count)::float8 AS n, sum("sumMs")::float8 AS total FROM ${rollupSpan(since, now)} r
      WHERE "jobKind" = ${kind} AND type::text IN ('item', ${callType})
      GROUP BY type`,
    listP99Buckets([{ kind }], { since, until: now }, ["item"]),
    db().$queryRaw<
      { tokens: number | null; tokenItems: number | null; bytes: number | null; uploadItems: number | null }[]
    >`
      SELECT sum(tokens)::float8 AS tokens, sum("tokenItems")::float8 AS "tokenItems",
             sum("uploadBytes")::float8 AS bytes, sum("uploadItems")::float8 AS "uploadItems"
      FROM "KindFiguresDay"
      WHERE "jobKind" = ${kind} AND day >= (${since.toISOString()}::timestamptz AT TIME ZONE 'UTC')::date
        AND day <= (${now.toISOString()}::timestamptz AT TIME ZONE 'UTC')::date`,
  ]);
  const scale = env().BOUNDED_TIME_SCALE;
  const item = sums.find((s) => s.type === "item");
  const call = sums.find((s) => s.type === callType);
  const items = item?.n ?? 0;
  const calls = call?.n ?? 0;
  const itemP99 = p99.find((b) => b.type === "item");
  const tokenItems = figures?.tokenItems ?? 0;
  return {
    items,
    calls,
    tokenItems,
    ...(tokenItems >= MIN_ITEMS_MEASURED && figures?.tokens ? { itemTokens: figures.tokens / tokenItems } : {}),
    ...(figures?.uploadItems && figures.bytes ? { itemBytes: figures.bytes / figures.uploadItems } : {}),
    ...(items >= MIN_ITEMS_MEASURED && itemP99
      ? { itemMeanMs: item!.total / items / scale, itemP99Ms: p99FromBucket(itemP99.bucket, itemP99.maxMs) / scale }
      : {}),
    ...(calls >= MIN_CALLS_MEASURED ? { callMeanMs: call!.total / calls / scale } : {}),
  };
}

/** A kind's measures and its provider's tokens per minute, as read at `at` (real ms) for a projection at `now`. */
interface KindReading {
  at: number;
  now: number;
  measures: KindMeasures;
  tpm: number | null;
}

const readings = new Map<string, KindReading>();

/** Forgets every kind's kept reading: the next projection reads afresh (for tests that change what was measured). */
export function forgetKindReadings(): void {
  readings.clear();
}

/**
 * The kind's measures and tokens per minute, read afresh unless `reuseMs` allows a reading this
 * process took less than that long ago for a moment as close: a week's measurements do not move
 * in seconds, and a worker starting many small jobs then pays for them once, not per job.
 */
async function kindReading(
  kind: string,
  provider: string | undefined,
  now: Date,
  reuseMs: number,
): Promise<KindReading> {
  const kept = readings.get(kind);
  const realNow = Date.now();
  if (kept && realNow - kept.at < reuseMs && Math.abs(now.getTime() - kept.now) < reuseMs) return kept;
  const [measures, tpm] = await Promise.all([measure(kind, now), tokensPerMinute(provider)]);
  const reading = { at: realNow, now: now.getTime(), measures, tpm };
  if (reuseMs > 0) readings.set(kind, reading);
  return reading;
}

const n = (x: number) => formatCount(Math.round(x));

/** The tokens per minute the kind's provider allows now (configured or learnt; the whole budget, else its input), or null when none is known. */
async function tokensPerMinute(provider: string | undefined): Promise<number | null> {
  if (provider !== "model") return null;
  try {
    const { budgets } = (await providerLimiter().peek("model")).tokenLimits;
    return (budgets.find((b) => b.budget === "tokens") ?? budgets.find((b) => b.budget === "input"))?.limit ?? null;
  } catch {
    // Redis unreadable: projected on calls alone, as before any limit was known.
    return null;
  }
}

/** Bytes an item of `jobId`'s upload holds (a part's: the file it was split from), or null without an upload (as a run's start reads it, lib/runs/attempt.ts). */
async function jobItemBytes(jobId: string): Promise<number | null> {
  const [row] = await db().$queryRaw<{ bytes: number; items: number | null }[]>`
    SELECT u."sizeBytes"::float8 AS bytes, src.total::float8 AS items FROM "Job" j
    JOIN "Job" src ON src.id = coalesce(j."parentId", j.id) JOIN "Upload" u ON u."jobId" = src.id
    WHERE j.id = ${jobId}::uuid`;
  return row?.items ? row.bytes / row.items : null;
}

export interface ProjectOptions {
  /** The job projected: its own upload's bytes per item scale the tokens an item takes. */
  jobId?: string;
  /** Those bytes per item, when the caller has them already (a run's start reads them): no read. */
  itemBytes?: number | null;
  /** Real ms a reading of the kind's measures this process took may be reused (0: read afresh). */
  reuseMs?: number;
}

/**
 * Projects `items` items of `kind` (see the module's formula). Null for a kind that is never
 * split. Reads the call rollups of the last `PROJECTION_WINDOW_DAYS` days; falls back to the
 * kind's defaults, figure by figure, while too little was measured.
 */
export async function projectItems(
  kind: string,
  items: number,
  now = new Date(),
  options: ProjectOptions = {},
): Promise<Projection | null> {
  const defaults = SPLITTABLE[kind as JobKind];
  const spec = kindSpec(kind);
  if (!defaults || !spec) return null;
  const [{ measures: m, tpm }, ownBytes] = await Promise.all([
    kindReading(kind, spec.provider, now, options.reuseMs ?? 0),
    options.itemBytes !== undefined ? options.itemBytes : options.jobId ? jobItemBytes(options.jobId) : null,
  ]);
  const itemMeanMs = Math.max(1, m.itemMeanMs ?? defaults.itemMeanMs);
  const tailMs = Math.max(0, (m.itemP99Ms ?? defaults.itemP99Ms) - itemMeanMs);
  const callMeanMs = Math.max(1, m.callMeanMs ?? defaults.callMeanMs);
  const inFlight = itemsInFlight(kind, env());
  const perCall = spec.modelBatch?.size ?? 1;
  const limits = spec.provider === "model" || spec.provider === "ocr" ? providerLimits(spec.provider) : null;

  const rates: { limit: Projection["limit"]; perSecond: number }[] = [
    { limit: "items in flight", perSecond: (inFlight * 1000) / itemMeanMs },
  ];
  if (limits) {
    rates.push({ limit: "provider calls in flight", perSecond: (limits.concurrency * perCall * 1000) / callMeanMs });
    rates.push({ limit: "provider request rate", perSecond: limits.rps * perCall });
  }
  // A job of longer items than those measured takes more tokens an item, in proportion.
  const itemTokens =
    (m.itemTokens ?? defaults.itemTokens) * (ownBytes && m.itemBytes ? Math.max(0.25, ownBytes / m.itemBytes) : 1);
  if (tpm !== null) rates.push({ limit: "provider tokens per minute", perSecond: tpm / 60 / itemTokens });
  const slowest = rates.reduce((a, b) => (b.perSecond < a.perSecond ? b : a));
  const ms = (items / slowest.perSecond) * 1000 + (items > 0 ? tailMs : 0);
  const measured = m.itemMeanMs !== undefined;
  const noun = nounOf(kind);
  const basis = measured
    ? `measured from ${n(m.items)} ${noun}s and ${n(m.calls)} calls in the last ${PROJECTION_WINDOW_DAYS} days`
    : `defaults (${defaults.why}): fewer than ${MIN_ITEMS_MEASURED} ${noun}s measured in the last ${PROJECTION_WINDOW_DAYS} days`;
  return {
    kind,
    items,
    inFlight,
    itemsPerSecond: slowest.perSecond,
    limit: slowest.limit,
    tailMs,
    ms,
    source: measured ? "measured" : "default",
    basis,
  };
}

/** The most items one part may hold to finish within `SAFETY_FACTOR` of `softMs`, its tail included (at least 1). */
export function itemsPerPart(p: Projection, softMs: number): number {
  return Math.max(1, Math.floor(((SAFETY_FACTOR * softMs - p.tailMs) * p.itemsPerSecond) / 1000));
}

/** Whether the whole job fits its budget with room for a slower day. */
export function fits(p: Projection, softMs: number): boolean {
  return p.ms <= SAFETY_FACTOR * softMs;
}

/** "10,000 rows at ≈ 21 rows/s (provider calls in flight) + 1 min for the slowest ≈ 9 min" */
export function describeProjection(p: Projection): string {
  const noun = nounOf(p.kind);
  const tail = p.tailMs >= 1000 ? ` + ${formatDuration(p.tailMs)} for the slowest` : "";
  return `${n(p.items)} ${noun}${p.items === 1 ? "" : "s"} at ≈ ${formatCompactRate(p.itemsPerSecond, noun)} (${p.limit})${tail} ${formatEstimate(p.ms)}`;
}
