import { setTimeout as delay } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { currentDeadline, currentTenant, deferralThreshold, runAsTenant, runWithRateLimitDeferral } from "./context";

describe("runWithRateLimitDeferral", () => {
  it("outside a context there is no threshold", () => {
    expect(deferralThreshold()).toBeUndefined();
  });

  it("two concurrent jobs never see each other's threshold, across interleaved awaits", async () => {
    const seen: Record<string, number[]> = { a: [], b: [] };
    const job = (name: "a" | "b", thresholdMs: number, pauses: number[]) =>
      runWithRateLimitDeferral(thresholdMs, async () => {
        for (const pause of pauses) {
          seen[name]!.push(deferralThreshold()!);
          await delay(pause);
          seen[name]!.push(deferralThreshold()!);
          await Promise.resolve();
        }
        return name;
      });
    // Pauses chosen so the two chains alternate: a, b, a, b, … Real timers on purpose: the context
    // must survive a timer turn of the event loop, where another job's code runs in between.
    const results = await Promise.all([job("a", 100, [5, 1, 7, 2, 3]), job("b", 200, [1, 6, 2, 5, 4])]);
    expect(results).toEqual(["a", "b"]);
    expect(new Set(seen.a)).toEqual(new Set([100]));
    expect(new Set(seen.b)).toEqual(new Set([200]));
    expect(seen.a).toHaveLength(10);
    expect(deferralThreshold()).toBeUndefined();
  });

  it("a nested context applies to its own function only", async () => {
    await runWithRateLimitDeferral(100, async () => {
      await runWithRateLimitDeferral(7, async () => {
        await delay(1); // a timer turn, not a microtask: what a real wait inside a job crosses
        expect(deferralThreshold()).toBe(7);
      });
      expect(deferralThreshold()).toBe(100);
    });
  });

  it("refuses a threshold that is not a number of ms", () => {
    expect(() => runWithRateLimitDeferral(Number.NaN, async () => 1)).toThrow(RangeError);
  });
});

describe("runAsTenant", () => {
  it("two concurrent jobs of different tenants each see their own tenant across timer turns, and nobody's outside", async () => {
    const seen: Record<string, (string | undefined)[]> = { a: [], b: [] };
    const job = (name: "a" | "b", pauses: number[]) =>
      runAsTenant(`tenant-${name}`, async () => {
        for (const pause of pauses) {
          await delay(pause);
          seen[name]!.push(currentTenant());
        }
      });
    await Promise.all([job("a", [3, 1, 4]), job("b", [1, 5, 2])]);
    expect(seen).toEqual({ a: ["tenant-a", "tenant-a", "tenant-a"], b: ["tenant-b", "tenant-b", "tenant-b"] });
    expect(currentTenant()).toBeUndefined();
  });

  it("carries the job's deadline beside its tenant, and a nested call without one has none", async () => {
    const seen: (number | undefined)[] = [];
    await runAsTenant(
      "tenant-a",
      async () => {
        await delay(1);
        seen.push(currentDeadline());
        await runAsTenant("tenant-b", async () => {
          seen.push(currentDeadline());
        });
      },
      1_234,
    );
    expect(seen).toEqual([1_234, undefined]);
    expect(currentDeadline()).toBeUndefined();
  });

  it("is independent of the deferral context: inside both, each is what its own call set", async () => {
    await runWithRateLimitDeferral(50, () =>
      runAsTenant("acme", async () => {
        await delay(1);
        expect([deferralThreshold(), currentTenant()]).toEqual([50, "acme"]);
      }),
    );
  });

  it("refuses a tenant the provider slots could not tell apart (empty, or containing the holder ids' separator)", () => {
    expect(() => runAsTenant("", async () => 1)).toThrow(RangeError);
    expect(() => runAsTenant("a|b", async () => 1)).toThrow(RangeError);
  });
});
