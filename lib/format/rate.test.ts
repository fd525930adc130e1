import { describe, expect, it } from "vitest";
import { formatCompactRate, formatPace, formatPerMinute, formatRate } from "./rate";

describe("formatRate", () => {
  it("whole numbers from 10 a second, thousands separated", () => {
    expect(formatRate(42.4, "row")).toBe("42 rows per second");
    expect(formatRate(1_234.6, "row")).toBe("1,235 rows per second");
  });

  it("a tenth under 10, without a trailing '.0'; 9.96 carries to '10'", () => {
    expect(formatRate(4.24, "row")).toBe("4.2 rows per second");
    expect(formatRate(2, "row")).toBe("2 rows per second");
    expect(formatRate(9.96, "row")).toBe("10 rows per second");
  });

  it("exactly one reads in the singular", () => {
    expect(formatRate(1, "document")).toBe("1 document per second");
    expect(formatRate(1 / 60, "document")).toBe("1 document per minute");
  });

  it("a pace that shows as under one a second is told per minute, and under one a minute per hour", () => {
    expect(formatRate(0.05, "document")).toBe("3 documents per minute");
    expect(formatRate(0.94, "row")).toBe("56 rows per minute");
    expect(formatRate(0.96, "row")).toBe("1 row per second");
    expect(formatRate(0.0005, "page")).toBe("1.8 pages per hour");
  });

  it("a pace that is not a positive number reads '—'", () => {
    expect(formatRate(0, "row")).toBe("—");
    expect(formatRate(Number.NaN, "row")).toBe("—");
    expect(formatRate(Number.POSITIVE_INFINITY, "row")).toBe("—");
  });
});

describe("formatPace and formatPerMinute", () => {
  it("the number of a pace as formatRate writes it, in the unit it is given in", () => {
    expect(formatPace(0)).toBe("0");
    expect(formatPace(2)).toBe("2");
    expect(formatPace(4.24)).toBe("4.2");
    expect(formatPace(9.96)).toBe("10");
    expect(formatPace(1_234.6)).toBe("1,235");
  });

  it("a count per minute reads '<n> / min'", () => {
    expect(formatPerMinute(12.4)).toBe("12 / min");
    expect(formatPerMinute(0.44)).toBe("0.4 / min");
  });
});

describe("formatCompactRate", () => {
  it("an operator's short pace: the same number per second, or one item every so long when slower than one a second", () => {
    expect(formatCompactRate(21.4, "row")).toBe("21 rows/s");
    expect(formatCompactRate(2.46, "row")).toBe("2.5 rows/s");
    expect(formatCompactRate(1_234.6, "row")).toBe("1,235 rows/s");
    expect(formatCompactRate(1 / 12, "document")).toBe("one document every 12 s");
  });
});
