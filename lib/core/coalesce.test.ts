import { describe, expect, it } from "vitest";
import { coalesce } from "./coalesce";

/** A batch runner that answers each input doubled once `release` is called, recording its batches. */
function runner() {
  const batches: number[][] = [];
  const pending: (() => void)[] = [];
  const run = (batch: number[]) => {
    batches.push(batch);
    return new Promise<number[]>((resolve) => pending.push(() => resolve(batch.map((n) => n * 2))));
  };
  const release = async () => {
    await Promise.resolve();
    for (const go of pending.splice(0)) go();
    await new Promise((r) => setImmediate(r));
  };
  return { run, batches, release };
}

describe("coalesce", () => {
  it("a call with nothing running goes alone at once; the calls made meanwhile go together in the next batch", async () => {
    const { run, batches, release } = runner();
    const call = coalesce(run);
    const first = call(1);
    expect(batches).toEqual([[1]]);
    const rest = [2, 3, 4, 5].map((n) => call(n));
    expect(batches).toHaveLength(1);
    await release();
    expect(batches).toEqual([[1], [2, 3, 4, 5]]);
    await release();
    expect(await first).toBe(2);
    expect(await Promise.all(rest)).toEqual([4, 6, 8, 10]);
  });

  it("takes at most `max` inputs a batch", async () => {
    const { run, batches, release } = runner();
    const call = coalesce(run, 3);
    const all = [1, 2, 3, 4, 5, 6, 7].map((n) => call(n));
    for (let i = 0; i < 4; i++) await release();
    expect(batches).toEqual([[1], [2, 3, 4], [5, 6, 7]]);
    expect(await Promise.all(all)).toEqual([2, 4, 6, 8, 10, 12, 14]);
  });

  it("a batch that throws rejects its own calls only, and the next batch runs", async () => {
    let n = 0;
    const call = coalesce(async (batch: string[]) => {
      n += 1;
      await new Promise((r) => setTimeout(r, 5));
      if (n === 2) throw new Error("the second batch failed");
      return batch.map((s) => s.toUpperCase());
    });
    const first = call("a");
    const second = [call("b"), call("c")];
    const late = new Promise<string>((resolve) => setTimeout(() => resolve(call("d")), 7));
    expect(await first).toBe("A");
    for (const p of second) await expect(p).rejects.toThrow("the second batch failed");
    expect(await late).toBe("D");
  });

  it("a batch answered with the wrong number of outputs rejects its calls instead of resolving them with nothing", async () => {
    const call = coalesce(async (batch: number[]) => batch.slice(1));
    await expect(call(1)).rejects.toThrow("a batch of 1 was answered with 0 outputs");
  });
});
