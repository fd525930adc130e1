import { describe, expect, it } from "vitest";
import type { ModelProvider } from "@/lib/model-providers";
import { latencyOf } from "@/lib/ratelimit/measured-latency";
import { DEADLINE_MARGIN_MS, decidingDeadline, firstInTime, sendAgainAt } from "./failover";

const provider = (name: string): ModelProvider => ({
  name,
  service: name === "primary" ? "model" : `model:${name}`,
  baseUrl: "https://example.test/v1",
  apiKey: undefined,
  model: `${name}-model`,
  concurrency: 8,
  rps: 5,
  tpm: undefined,
});
const route = [provider("primary"), provider("backup"), provider("spare")];
const p50 = (ms: Record<string, number | null>) => async (p: ModelProvider) =>
  ms[p.name] === null ? null : { p50Ms: ms[p.name]!, p90Ms: 2 * ms[p.name]!, samples: 50 };

describe("failover by the deadline", () => {
  it("starts on the first provider whose median answer comes before the deadline", async () => {
    const now = 1_000_000;
    const deadline = now + 10_000;
    const latencies = p50({ primary: 20_000, backup: 3_000, spare: 1_000 });
    expect(await firstInTime(route, deadline, now, latencies)).toEqual({
      index: 1,
      skipped: [{ provider: "primary", p50Ms: 20_000 }],
    });
    // Time enough, no deadline, or a route of one: the first.
    expect((await firstInTime(route, now + 60_000, now, latencies)).index).toBe(0);
    expect((await firstInTime(route, undefined, now, latencies)).index).toBe(0);
    expect((await firstInTime(route.slice(0, 1), deadline, now, latencies)).index).toBe(0);
    // Not measured yet: nothing decided on it, it is asked.
    expect((await firstInTime(route, deadline, now, p50({ primary: null, backup: 1 }))).index).toBe(0);
    // None in time: the last one is asked, never none.
    expect(
      (await firstInTime(route, deadline, now, p50({ primary: 20_000, backup: 20_000, spare: 20_000 }))).index,
    ).toBe(2);
  });

  it("sends again on the next provider when nine in ten of its answers would still come before the deadline", async () => {
    const now = 1_000_000;
    const deadline = now + 60_000;
    const backup = p50({ backup: 1_000 });
    expect(await sendAgainAt(route[1]!, deadline, now, backup)).toBe(deadline - 2_000 - DEADLINE_MARGIN_MS);
    // Past that moment: at once, while its median answer still comes in time; after, never.
    expect(await sendAgainAt(route[1]!, now + 1_500, now, backup)).toBe(now);
    expect(await sendAgainAt(route[1]!, now + 1_000, now, backup)).toBeNull();
    expect(await sendAgainAt(route[1]!, undefined, now, backup)).toBeNull();
    expect(await sendAgainAt(route[1]!, deadline, now, p50({ backup: null }))).toBeNull();
  });

  it("reads the median and the 90th percentile off the recent answers, once there are enough", () => {
    expect(latencyOf([1, 2, 3])).toBeNull();
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(latencyOf(values)).toEqual({ p50Ms: 51, p90Ms: 91, samples: 100 });
  });

  it("decides by the deadline only under the policy deadline", () => {
    expect(decidingDeadline("deadline", 42)).toBe(42);
    expect(decidingDeadline("outage", 42)).toBeUndefined();
    expect(decidingDeadline("never", 42)).toBeUndefined();
  });
});
