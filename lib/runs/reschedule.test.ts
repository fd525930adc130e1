import { describe, expect, it } from "vitest";
import { KINDS, QUEUE_NAMES, RESCHEDULE_QUEUES } from "@/lib/catalog/catalog";
import { DEFER_THRESHOLD_MS } from "@/lib/ratelimit/limiter";
import { MAX_STARTED_ATTEMPTS, rescheduleWorkerOptions } from "./reschedule";

describe("the guard against endless self-delays", () => {
  it("maxStartedAttempts is set for the sync queue, above every start a throttled sync can make within its maximum age", () => {
    const maxAge = KINDS.marketplace_sync.maxAge!.ms;
    // Each reschedule waits at least the deferral threshold: at most this many starts in a lifetime.
    const legitimateStarts = Math.ceil(maxAge / DEFER_THRESHOLD_MS) + 1;
    expect(rescheduleWorkerOptions("marketplace-sync").maxStartedAttempts).toBe(MAX_STARTED_ATTEMPTS);
    expect(MAX_STARTED_ATTEMPTS).toBeGreaterThan(legitimateStarts);
    expect(Number.isFinite(MAX_STARTED_ATTEMPTS)).toBe(true);
  });

  it("the queues whose jobs wait for a limited service reschedule; the others keep BullMQ's defaults", () => {
    expect([...RESCHEDULE_QUEUES].sort()).toEqual([
      "agent-batch",
      "agent-interactive",
      "documents",
      "imports",
      "marketplace-sync",
    ]);
    for (const q of QUEUE_NAMES.filter((q) => !RESCHEDULE_QUEUES.has(q)))
      expect(rescheduleWorkerOptions(q)).toEqual({});
  });
});
