import { describe, expect, it } from "vitest";
import { formatTraceparent, newSpanId, newTraceId, parseTraceparent } from "./traceparent";

describe("traceparent", () => {
  const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  const spanId = "00f067aa0ba902b7";

  it("reads a version-00 header and writes it back the same", () => {
    const header = `00-${traceId}-${spanId}-01`;
    expect(parseTraceparent(header)).toEqual({ traceId, spanId, sampled: true });
    expect(formatTraceparent(parseTraceparent(header)!)).toBe(header);
    expect(parseTraceparent(`00-${traceId}-${spanId}-00`)?.sampled).toBe(false);
  });

  it("accepts a later version's extra fields, and refuses what the spec calls invalid", () => {
    expect(parseTraceparent(`01-${traceId}-${spanId}-01-extra`)).toEqual({ traceId, spanId, sampled: true });
    for (const bad of [
      undefined,
      "",
      `00-${traceId}-${spanId}-01-extra`,
      `ff-${traceId}-${spanId}-01`,
      `00-${"0".repeat(32)}-${spanId}-01`,
      `00-${traceId}-${"0".repeat(16)}-01`,
      `00-${traceId.toUpperCase()}-${spanId}-01`,
      `00-${traceId}-${spanId}`,
    ]) {
      expect(parseTraceparent(bad), String(bad)).toBeNull();
    }
  });

  it("mints ids of the right shape", () => {
    expect(
      parseTraceparent(formatTraceparent({ traceId: newTraceId(), spanId: newSpanId(), sampled: false })),
    ).not.toBeNull();
  });
});
