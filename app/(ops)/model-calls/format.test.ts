import { describe, expect, it } from "vitest";
import { formatTokens } from "./format";
import { formatUsd } from "@/lib/format/number";

describe("token and cost labels", () => {
  it("says tokens with their unit, grouped by thousands", () => {
    expect(formatTokens(12_400)).toBe("12,400 tokens");
    expect(formatTokens(1)).toBe("1 token");
    expect(formatTokens(0)).toBe("0 tokens");
  });

  it("says dollars to the precision that matters at their size", () => {
    expect(formatUsd(0.0314)).toBe("$0.031");
    expect(formatUsd(0.0004)).toBe("<$0.001");
    expect(formatUsd(0)).toBe("$0");
    expect(formatUsd(4.2)).toBe("$4.20");
    expect(formatUsd(1234.4)).toBe("$1,234");
    expect(formatUsd(null)).toBe("—");
  });
});
