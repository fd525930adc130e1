import { CALL_OUTCOMES, type CallOutcome } from "@/lib/core/call-outcomes";
/**
 * Latency buckets of the model-call histograms — the TypeScript twin of the SQL function
 * `bounded_latency_bucket(ms)` (prisma/migrations/20261202103600_call_rollups_and_notifications),
 * which the `ModelCallRollup` trigger uses to count every call. The two must agree exactly;
 * `buckets.integration.test.ts` compares them value by value.
 *
 * Log-spaced, six buckets per decade starting at 10 ms: bucket `b` spans
 * `[10 · 10^(b/6), 10 · 10^((b+1)/6))` ms, so each bucket is ~1.47× wider than the one before.
 * Two ends are clamped:
 * - bucket 0 also holds everything under 10 ms (it is `[0, ~14.7 ms)`): deterministic tool calls
 *   live there and nobody tunes below 10 ms;
 * - bucket 33 holds everything from 10 · 10^5.5 ms ≈ 3,162 s ≈ 52.7 min up (bucket 32 starts at
 *   ~35.9 min). Model calls that slow have long been aborted by their job's deadline.
 *
 * Six per decade keeps the relative error of a percentile read off a bucket under one bucket
 * width (×1.47) while the whole range from 10 ms to an hour fits in 34 bars.
 */

/** Buckets per decade of milliseconds. */
const BUCKETS_PER_DECADE = 6;
/** The lower bound of bucket 1's formula: bucket `b` starts at `FIRST_BOUND_MS · 10^(b/6)`. */
const FIRST_BOUND_MS = 10;
/** The last bucket; everything slower is counted in it. */
export const LAST_BUCKET = 33;
/** Number of buckets (0 … LAST_BUCKET). */
export const BUCKET_COUNT = LAST_BUCKET + 1;

/** The exact (real-valued) lower edge of bucket `b` by the formula, in ms; 0 for bucket 0. */
export function bucketLowerMs(b: number): number {
  if (b <= 0) return 0;
  return FIRST_BOUND_MS * 10 ** (b / BUCKETS_PER_DECADE);
}

/** The upper edge of bucket `b` in ms (exclusive); `Infinity` for the last bucket. */
export function bucketUpperMs(b: number): number {
  if (b >= LAST_BUCKET) return Infinity;
  return FIRST_BOUND_MS * 10 ** ((b + 1) / BUCKETS_PER_DECADE);
}

/**
 * The p99 of one call, read off the rollup: the upper edge of the bucket holding the 99th
 * percentile (conservative by at most one bucket width), but never more than the slowest call
 * actually recorded in that bucket — which also bounds the open-ended last bucket.
 */
export function p99FromBucket(bucket: number, maxMsInBucket: number): number {
  return Math.min(bucketUpperMs(bucket), maxMsInBucket);
}

/**
 * `THRESHOLDS[b]` is the smallest whole number of milliseconds that falls in bucket `b` or above
 * (durations are stored as whole milliseconds). Comparing integers against this table avoids
 * the floating-point edge cases of `floor(6 · log10(ms / 10))`: the bounds are irrational except
 * at whole decades (100 ms, 1 s, 10 s …), where they are exact integers.
 */
const THRESHOLDS: readonly number[] = Array.from({ length: BUCKET_COUNT }, (_, b) =>
  // −1e-9: 10 · 10^(6/6) may come out as 100.00000000000001, which must still be 100.
  b === 0 ? 0 : Math.ceil(bucketLowerMs(b) - 1e-9),
);

/**
 * The bucket of a duration, exactly as `bounded_latency_bucket(ms)` computes it in SQL.
 * `ms` is rounded to whole milliseconds first, as `recordModelCall` stores it; negative values
 * count as 0.
 */
export function latencyBucket(ms: number): number {
  const whole = Math.max(0, Math.round(ms));
  // Binary search for the last threshold ≤ whole.
  let lo = 0;
  let hi = LAST_BUCKET;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (THRESHOLDS[mid]! <= whole) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** The smallest whole millisecond value counted in bucket `b` (0 for bucket 0). */
export function bucketFirstMs(b: number): number {
  return THRESHOLDS[Math.max(0, Math.min(LAST_BUCKET, b))]!;
}

/**
 * A position on a continuous log axis where bucket `b` occupies `[b, b + 1)`: what the chart uses
 * to place tick labels (1 min sits at ≈ 22.67) and the budget line between bar edges. Clamped to
 * the drawn range `[0, BUCKET_COUNT]`.
 */
export function logPosition(ms: number): number {
  if (!(ms > FIRST_BOUND_MS)) return 0;
  return Math.min(BUCKET_COUNT, BUCKETS_PER_DECADE * Math.log10(ms / FIRST_BOUND_MS));
}

/** A percentile read off the bucket counts, with the bucket it fell in. */
export interface PercentileEstimate {
  /** The estimate in whole milliseconds (see `estimatePercentile` for how it is made). */
  ms: number;
  bucket: number;
  /** The bucket's edges: the true percentile lies in `[lowerMs, upperMs)`. `upperMs` is null for the open last bucket. */
  lowerMs: number;
  upperMs: number | null;
}

/**
 * The duration `f` (0 < f ≤ 1) of the way into bucket `b`'s calls: geometric between its edges
 * (they are log-spaced), linear in bucket 0, whose lower edge is 0 ms. The upper edge used is the
 * bucket's or the slowest call seen in it, whichever is smaller; in the open last bucket the
 * slowest call is the only upper edge.
 */
export function withinBucketMs(b: number, f: number, maxMs: number | null): number {
  const lowerMs = bucketLowerMs(b);
  const edge = bucketUpperMs(b);
  let upper = maxMs !== null ? Math.min(edge, maxMs) : edge;
  if (!Number.isFinite(upper)) upper = lowerMs * 10 ** (1 / BUCKETS_PER_DECADE); // open bucket, max unknown
  upper = Math.max(lowerMs, upper);
  return lowerMs > 0 ? lowerMs * (upper / lowerMs) ** f : lowerMs + f * (upper - lowerMs);
}

/**
 * The `q`-quantile (0 < q ≤ 1) of a latency histogram, estimated from cumulative bucket counts.
 *
 * The rank is the nearest rank `⌈q · n⌉` (1-based). The bucket that holds that rank is exact;
 * within it the estimate is **interpolated** by how far the rank sits into the bucket's count —
 * geometrically, because the buckets are log-spaced (linearly in bucket 0, whose lower edge is
 * 0 ms). The upper edge used is the bucket's edge or the observed maximum, whichever is smaller,
 * so no percentile exceeds `max`; in the open last bucket the maximum is the only upper edge.
 * Error: the true value is always inside the reported bucket, i.e. within a factor of
 * 10^(1/6) ≈ 1.47 of the estimate; with many calls per bucket it is usually far closer.
 *
 * @param counts - calls per bucket, index = bucket number.
 * @param maxMs - the slowest call seen (from the rollup's `maxMs`), or null when unknown.
 */
export function estimatePercentile(
  counts: readonly number[],
  q: number,
  maxMs: number | null,
): PercentileEstimate | null {
  const total = counts.reduce((n, c) => n + c, 0);
  if (total <= 0) return null;
  const rank = Math.min(total, Math.max(1, Math.ceil(q * total)));
  let before = 0;
  for (let b = 0; b < counts.length; b++) {
    const count = counts[b] ?? 0;
    if (count <= 0 || before + count < rank) {
      before += count;
      continue;
    }
    const edge = bucketUpperMs(b);
    return {
      ms: Math.round(withinBucketMs(b, (rank - before) / count, maxMs)),
      bucket: b,
      lowerMs: Math.round(bucketLowerMs(b)),
      upperMs: Number.isFinite(edge) ? Math.round(edge) : null,
    };
  }
  return null;
}

/** What the text summary beside a latency chart says about one set of calls. */
export interface LatencySummary {
  total: number;
  byOutcome: Record<CallOutcome, number>;
  p50: PercentileEstimate | null;
  p90: PercentileEstimate | null;
  p99: PercentileEstimate | null;
  /** The slowest call, exact (the rollup keeps each cell's maximum). */
  maxMs: number | null;
  /** Exact mean (the rollup keeps each cell's sum). */
  meanMs: number | null;
}

/** One aggregated cell as the rollup query returns it: a bucket × outcome with its count, sum and max. */
export interface BucketCell {
  bucket: number;
  outcome: CallOutcome;
  count: number;
  sumMs: number;
  maxMs: number;
}

/** The summary of a histogram given as aggregated cells (any order, any number per bucket). */
export function summarizeCells(cells: readonly BucketCell[]): LatencySummary {
  const counts = new Array<number>(BUCKET_COUNT).fill(0);
  const byOutcome = Object.fromEntries(CALL_OUTCOMES.map((o) => [o, 0])) as Record<CallOutcome, number>;
  let total = 0;
  let sumMs = 0;
  let maxMs: number | null = null;
  for (const c of cells) {
    const b = Math.max(0, Math.min(LAST_BUCKET, c.bucket));
    counts[b]! += c.count;
    byOutcome[c.outcome] += c.count;
    total += c.count;
    sumMs += c.sumMs;
    if (c.count > 0) maxMs = Math.max(maxMs ?? 0, c.maxMs);
  }
  return {
    total,
    byOutcome,
    p50: estimatePercentile(counts, 0.5, maxMs),
    p90: estimatePercentile(counts, 0.9, maxMs),
    p99: estimatePercentile(counts, 0.99, maxMs),
    maxMs,
    meanMs: total > 0 ? Math.round(sumMs / total) : null,
  };
}
