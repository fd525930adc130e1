import { describe, expect, it } from "vitest";
import {
  BUCKET_COUNT,
  LAST_BUCKET,
  bucketFirstMs,
  bucketLowerMs,
  bucketUpperMs,
  estimatePercentile,
  latencyBucket,
  logPosition,
  summarizeCells,
  type BucketCell,
} from "./buckets";

/** Counts per bucket from a list of durations, the way the rollup trigger counts them. */
function histogram(durations: number[]): number[] {
  const counts = new Array<number>(BUCKET_COUNT).fill(0);
  for (const d of durations) counts[latencyBucket(d)]! += 1;
  return counts;
}

describe("bucket edges", () => {
  it("are six per decade from 10 ms: 100 ms, 1 s and 10 s start buckets 6, 12 and 18", () => {
    expect(bucketLowerMs(6)).toBeCloseTo(100, 9);
    expect([
      latencyBucket(99),
      latencyBucket(100),
      latencyBucket(999),
      latencyBucket(1_000),
      latencyBucket(10_000),
    ]).toEqual([5, 6, 11, 12, 18]);
    expect(bucketUpperMs(5)).toBeCloseTo(bucketLowerMs(6), 9);
    expect(bucketUpperMs(LAST_BUCKET)).toBe(Infinity);
  });

  it("clamp: under 10 ms is bucket 0, an hour or a day is the last bucket", () => {
    expect([latencyBucket(-5), latencyBucket(0), latencyBucket(9.4), latencyBucket(14)]).toEqual([0, 0, 0, 0]);
    expect(latencyBucket(3_600_000)).toBe(LAST_BUCKET);
    expect(latencyBucket(86_400_000)).toBe(LAST_BUCKET);
  });

  it("every bucket's first whole millisecond is in it and the one before is not", () => {
    for (let b = 1; b < BUCKET_COUNT; b++) {
      expect(latencyBucket(bucketFirstMs(b))).toBe(b);
      expect(latencyBucket(bucketFirstMs(b) - 1)).toBe(b - 1);
    }
  });

  it("log positions place 1 min between buckets 22 and 23", () => {
    expect(logPosition(60_000)).toBeCloseTo(22.67, 2);
    expect(logPosition(5)).toBe(0);
  });
});

describe("estimatePercentile: read off cumulative bucket counts", () => {
  it("returns null without calls", () => {
    expect(estimatePercentile(new Array(BUCKET_COUNT).fill(0), 0.5, null)).toBeNull();
  });

  it("finds the bucket that holds the nearest rank ⌈q·n⌉", () => {
    // 100 calls: 50 at 1 s (bucket 12), 40 at 5 s (bucket 16), 9 at 20 s (bucket 19), 1 at 100 s (bucket 24).
    const durations = [...Array(50).fill(1_000), ...Array(40).fill(5_000), ...Array(9).fill(20_000), 100_000];
    const counts = histogram(durations);
    expect(estimatePercentile(counts, 0.5, 100_000)?.bucket).toBe(12); // rank 50: the last of the 1 s calls
    expect(estimatePercentile(counts, 0.51, 100_000)?.bucket).toBe(16); // rank 51: the first 5 s call
    expect(estimatePercentile(counts, 0.9, 100_000)?.bucket).toBe(16); // rank 90
    expect(estimatePercentile(counts, 0.99, 100_000)?.bucket).toBe(19); // rank 99
    expect(estimatePercentile(counts, 1, 100_000)?.bucket).toBe(24);
  });

  it("interpolates inside the bucket: the last rank of a bucket is its upper edge, never above the max", () => {
    const counts = histogram([...Array(50).fill(1_000), ...Array(50).fill(5_000)]);
    const p50 = estimatePercentile(counts, 0.5, 5_000)!;
    expect(p50.ms).toBe(Math.round(bucketUpperMs(12))); // 1 468 ms: the top of the 1 s bucket
    expect(p50.lowerMs).toBe(1_000);
    const p99 = estimatePercentile(counts, 0.99, 5_000)!;
    expect(p99.ms).toBeLessThanOrEqual(5_000);
    expect(p99.ms).toBeGreaterThanOrEqual(Math.round(bucketLowerMs(16)));
    // Half-way into a bucket is its geometric middle.
    const single = new Array<number>(BUCKET_COUNT).fill(0);
    single[18] = 2;
    expect(estimatePercentile(single, 0.5, null)!.ms).toBe(
      Math.round(Math.sqrt(bucketLowerMs(18) * bucketUpperMs(18))),
    );
  });

  it("stays within one bucket of the true percentile of a lognormal sample", () => {
    // Production's shape: lognormal, median 5.5 s, σ 0.782 (Box–Muller on a seeded generator).
    const random = seeded(42);
    const durations = Array.from({ length: 5_000 }, () => {
      const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
      return Math.round(5_500 * Math.exp(0.782 * z));
    });
    const sorted = [...durations].sort((a, b) => a - b);
    const counts = histogram(durations);
    for (const q of [0.5, 0.9, 0.99]) {
      const truth = sorted[Math.ceil(q * sorted.length) - 1]!;
      const est = estimatePercentile(counts, q, Math.max(...durations))!;
      expect(est.ms / truth).toBeGreaterThan(1 / 1.47);
      expect(est.ms / truth).toBeLessThan(1.47);
      expect(latencyBucket(truth)).toBe(est.bucket);
    }
  });
});

describe("summarizeCells", () => {
  it("adds the outcomes, keeps the exact max and mean, and puts every outcome in the percentiles", () => {
    const cells: BucketCell[] = [
      { bucket: 16, outcome: "ok", count: 8, sumMs: 8 * 5_000, maxMs: 5_100 },
      { bucket: 16, outcome: "error", count: 1, sumMs: 5_050, maxMs: 5_050 },
      { bucket: 24, outcome: "aborted", count: 1, sumMs: 110_000, maxMs: 110_000 },
    ];
    const s = summarizeCells(cells);
    expect(s.total).toBe(10);
    expect(s.byOutcome).toEqual({ ok: 8, error: 1, aborted: 1, superseded: 0 });
    expect(s.maxMs).toBe(110_000);
    expect(s.meanMs).toBe(Math.round((40_000 + 5_050 + 110_000) / 10));
    expect(s.p50?.bucket).toBe(16);
    expect(s.p99?.bucket).toBe(24);
    expect(s.p99?.ms).toBeLessThanOrEqual(110_000);
  });

  it("says nothing about percentiles without calls", () => {
    expect(summarizeCells([])).toMatchObject({ total: 0, p50: null, p99: null, maxMs: null, meanMs: null });
  });
});

/** A seeded generator (mulberry32): the same sample on every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
