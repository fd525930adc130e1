import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { BUCKET_COUNT, LAST_BUCKET, bucketFirstMs, latencyBucket } from "./buckets";

afterAll(async () => {
  await closeDb();
});

/** What PostgreSQL's `bounded_latency_bucket` (the trigger's function) says for each value. */
async function sqlBuckets(values: number[]): Promise<Map<number, number>> {
  const rows = await db().$queryRaw<{ ms: number; bucket: number }[]>`
    SELECT ms, bounded_latency_bucket(ms) AS bucket FROM unnest(${values}::int[]) AS ms`;
  return new Map(rows.map((r) => [Number(r.ms), Number(r.bucket)]));
}

describe("latencyBucket agrees with the SQL function the rollup trigger uses", () => {
  it("on the named values, from 0 ms to past the last bucket", async () => {
    const values = [
      0, 1, 9, 10, 14, 15, 21, 22, 31, 32, 46, 47, 68, 69, 99, 100, 101, 146, 147, 215, 216, 999, 1_000, 1_001, 5_500,
      10_000, 35_000, 60_000, 600_000, 660_000, 2_154_434, 2_154_435, 3_162_277, 3_162_278, 3_600_000, 10_000_000,
      2_147_483_647,
    ];
    const expected = await sqlBuckets(values);
    expect(values.map((v) => [v, latencyBucket(v)])).toEqual(values.map((v) => [v, expected.get(v)]));
  });

  it("on both sides of every bucket edge", async () => {
    const values = [
      ...new Set(
        Array.from({ length: BUCKET_COUNT }, (_, b) => bucketFirstMs(b))
          .flatMap((t) => [t - 1, t, t + 1])
          .filter((v) => v >= 0),
      ),
    ];
    const expected = await sqlBuckets(values);
    const mismatches = values
      .filter((v) => latencyBucket(v) !== expected.get(v))
      .map((v) => ({ ms: v, ts: latencyBucket(v), sql: expected.get(v) }));
    expect(mismatches).toEqual([]);
  });

  it("on every whole millisecond up to 100 s and a log-spaced sweep beyond", async () => {
    const values = Array.from({ length: 100_001 }, (_, i) => i);
    for (let x = 100_000; x < 20_000_000; x = Math.ceil(x * 1.013)) values.push(x);
    const expected = await sqlBuckets(values);
    const mismatches = values.filter((v) => latencyBucket(v) !== expected.get(v)).slice(0, 10);
    expect(mismatches).toEqual([]);
  });

  it("puts 3.6 s in bucket 15, an hour and more in the last bucket", async () => {
    expect(latencyBucket(3_600)).toBe(15);
    expect(latencyBucket(3_600_000)).toBe(LAST_BUCKET);
    expect((await sqlBuckets([3_600_000])).get(3_600_000)).toBe(LAST_BUCKET);
  });
});
