import { describe, expect, it } from "vitest";
import { SAFETY_FACTOR } from "@/lib/projection/projection";
import {
  batchLaneOn,
  CANCEL_SETTLE_MS,
  DEFAULT_TURNAROUND_MS,
  decideLane,
  decideWithoutItems,
  type LaneInput,
} from "./batch-lane";

const now = new Date("2026-12-04T10:00:00Z");
const input = (over: Partial<LaneInput> = {}): LaneInput => ({
  kind: "csv_import",
  items: 1_000,
  remainingMs: 3 * 3_600_000,
  directMs: 7 * 60_000,
  directWords: "1,000 rows at ≈ 2.4 rows/s",
  turnaround: { ms: DEFAULT_TURNAROUND_MS, measured: 0 },
  now,
  timeScale: 1,
  ...over,
});

describe("decideLane: the batch lane when turnaround + direct time with its margin fits the budget left", () => {
  it("takes the batch lane with room, and holds the batch to the last moment before the deadline", () => {
    const d = decideLane(input());
    expect(d.lane).toBe("batch");
    if (d.lane !== "batch") return;
    expect(d.expectedBy).toEqual(new Date(now.getTime() + DEFAULT_TURNAROUND_MS));
    expect(d.deadlineAt).toEqual(new Date(now.getTime() + 3 * 3_600_000));
    // The deadline less a cancel's settling (10 min) and the direct time ÷ the safety factor (7 min ÷ 0.7 = 10 min).
    expect(d.lastMomentAt).toEqual(new Date(d.deadlineAt.getTime() - 20 * 60_000));
    expect(d.text).toMatch(
      /^Batch lane: 1,000 rows .*turnaround 1 h .*the default until 5 batches.*20 min to stop it and finish directly/,
    );
    expect(d.text).toContain("deadline 13:00:00 UTC");
  });

  it("runs directly when the turnaround and the direct time do not fit, and says by how much", () => {
    const d = decideLane(input({ remainingMs: 60 * 60_000 }));
    expect(d.lane).toBe("direct");
    expect(d.text).toMatch(/^Direct lane: .* = 1 h 20 min, more than the 1 h left of the budget\.$/);
  });

  it("is exact at the edge: turnaround + settling + direct ÷ safety factor equal to the budget left still fits", () => {
    const remainingMs = DEFAULT_TURNAROUND_MS + CANCEL_SETTLE_MS + (7 * 60_000) / SAFETY_FACTOR;
    expect(decideLane(input({ remainingMs })).lane).toBe("batch");
    expect(decideLane(input({ remainingMs: remainingMs - 1 })).lane).toBe("direct");
  });

  it("uses the measured turnaround when there is one, and scales wall-clock points by the time scale", () => {
    const d = decideLane(input({ turnaround: { ms: 20 * 60_000, measured: 12 }, timeScale: 0.001 }));
    expect(d.lane).toBe("batch");
    if (d.lane !== "batch") return;
    expect(d.expectedBy.getTime() - now.getTime()).toBe(1_200);
    expect(d.text).toContain("p95 of 12 batches");
  });

  it("decides direct before reading a row when the budget left cannot hold the turnaround and a cancel's settling", () => {
    const turnaround = { ms: DEFAULT_TURNAROUND_MS, measured: 0 };
    const d = decideWithoutItems({ remainingMs: 50 * 60_000, turnaround });
    expect(d).toEqual({
      lane: "direct",
      text: "Direct lane: the batch service's turnaround 1 h (the default until 5 batches are measured) + 10 min for a cancel to settle = 1 h 10 min, more than the 50 min left of the budget.",
    });
    // With room for both, it takes the rows (their direct time) to tell.
    expect(decideWithoutItems({ remainingMs: DEFAULT_TURNAROUND_MS + CANCEL_SETTLE_MS, turnaround })).toBeNull();
  });

  it("sends nothing when no row needs the model", () => {
    expect(decideLane(input({ items: 0 }))).toEqual({ lane: "direct", text: "Direct lane: no row needs the model." });
  });
});

describe("batchLaneOn: the catalog allows it, the environment keeps it on", () => {
  it("is on for imports, off when turned off, never for kinds the catalog does not allow", () => {
    expect(batchLaneOn("csv_import", "imports", ["csv_import"])).toBe(true);
    expect(batchLaneOn("csv_import", "imports", [])).toBe(false);
    expect(batchLaneOn("agent_run", "agent-interactive", ["agent_run"])).toBe(false);
    expect(batchLaneOn("bulk_ocr", "documents", ["bulk_ocr"])).toBe(false);
  });
});
