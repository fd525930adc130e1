import { describe, expect, it } from "vitest";
import { type ClassRun, pacedOutOfTime } from "./pass";

/** A class's run whose batch began `batchMs` ago, with a sleep that only records what it was asked. */
function runOf(batchMs: number, options: Partial<ClassRun> = {}) {
  const rests: number[] = [];
  const run: ClassRun = {
    cutoff: new Date(),
    now: new Date(),
    batch: 500,
    until: performance.now() + 60_000,
    dryRun: false,
    restFactor: 3,
    sleep: async (ms) => {
      rests.push(ms);
    },
    batchStartedAt: performance.now() - batchMs,
    ...options,
  };
  return { run, rests };
}

describe("a retention pass between two batches", () => {
  it("rests three times as long as the batch took, then starts the next one's clock", async () => {
    const { run, rests } = runOf(40);
    expect(await pacedOutOfTime(run)).toBe(false);
    expect(rests).toHaveLength(1);
    expect(rests[0]).toBeGreaterThanOrEqual(120);
    expect(rests[0]).toBeLessThan(120 + 3 * 50);
    expect(performance.now() - run.batchStartedAt).toBeLessThan(50);
  });

  it("does not rest in a dry run (it deletes nothing) or with a rest factor of 0", async () => {
    for (const options of [{ dryRun: true }, { restFactor: 0 }]) {
      const { run, rests } = runOf(40, options);
      await pacedOutOfTime(run);
      expect(rests).toEqual([]);
    }
  });

  it("says the class's share of the pass is used up once its time has passed", async () => {
    const { run } = runOf(10, { until: performance.now() - 1 });
    expect(await pacedOutOfTime(run)).toBe(true);
  });
});
