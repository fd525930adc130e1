import { describe, expect, it } from "vitest";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  formatAgo,
  formatDuration,
  formatDurationRounded,
  formatEstimate,
  formatSeconds,
  formatWaitSeconds,
} from "./duration";

describe("formatDuration", () => {
  it("zero is '0 s', and anything that rounds to zero milliseconds with it", () => {
    expect(formatDuration(0)).toBe("0 s");
    expect(formatDuration(0.4)).toBe("0 s");
    expect(formatDuration(-0.4)).toBe("0 s");
  });

  it("under a second in whole milliseconds; 999.6 ms carries to '1 s', not '1000 ms'", () => {
    expect(formatDuration(1)).toBe("1 ms");
    expect(formatDuration(450)).toBe("450 ms");
    expect(formatDuration(999.4)).toBe("999 ms");
    expect(formatDuration(999.6)).toBe("1 s");
  });

  it("under 10 s to a tenth, without a trailing '.0'; 9.96 s carries to '10 s'", () => {
    expect(formatDuration(1_000)).toBe("1 s");
    expect(formatDuration(2_040)).toBe("2 s");
    expect(formatDuration(2_500)).toBe("2.5 s");
    expect(formatDuration(9_949)).toBe("9.9 s");
    expect(formatDuration(9_960)).toBe("10 s");
  });

  it("59.5 s rounds to the minute it reaches: '1 min', unmarked (sub-second remainders are not marked)", () => {
    expect(formatDuration(59_400)).toBe("59 s");
    expect(formatDuration(59_500)).toBe("1 min");
  });

  it("a 90 s limit reads '90 s', never '2 min'; 60 s and 120 s read as minutes", () => {
    expect(formatDuration(60_000)).toBe("1 min");
    expect(formatDuration(90_000)).toBe("90 s");
    expect(formatDuration(119_000)).toBe("119 s");
    expect(formatDuration(120_000)).toBe("2 min");
    expect(formatDuration(150_000)).toBe("2 min 30 s");
    expect(formatDuration(450_000)).toBe("7 min 30 s");
  });

  it("just under an hour keeps its seconds: 3599 s is '59 min 59 s', not '1 h'", () => {
    expect(formatDuration(3_599_000)).toBe("59 min 59 s");
    expect(formatDuration(3_599_600)).toBe("1 h");
  });

  it("hours: exact when round, two units at most, '≈' once when a unit was dropped", () => {
    expect(formatDuration(3_600_000)).toBe("1 h");
    expect(formatDuration(3_900_000)).toBe("1 h 5 min");
    expect(formatDuration(5_400_000)).toBe("1 h 30 min");
    expect(formatDuration(3_605_000)).toBe("≈1 h");
    expect(formatDuration(3_930_000)).toBe("≈1 h 6 min");
    // Rounded to the smaller unit, carrying into the larger: never "3 h 59 min" for 3 h 59 min 50 s.
    expect(formatDuration(4 * 3_600_000 - 10_000)).toBe("≈4 h");
  });

  it("days are hours, so they compare with minutes at a glance", () => {
    expect(formatDuration(86_400_000)).toBe("24 h");
    expect(formatDuration(2 * 86_400_000 + 7 * 3_600_000)).toBe("55 h");
    expect(formatDuration(300_000_000)).toBe("83 h 20 min");
    expect(formatDuration(200_000_000)).toBe("≈55 h 33 min");
  });

  it("negative durations keep their sign and their marker stays in front", () => {
    expect(formatDuration(-90_000)).toBe("-90 s");
    expect(formatDuration(-450)).toBe("-450 ms");
    expect(formatDuration(-200_000_000)).toBe("≈-55 h 33 min");
  });

  it("a value that is not a number reads '—', never 'NaN ms'", () => {
    expect(formatDuration(Number.NaN)).toBe("—");
    expect(formatDuration(Infinity)).toBe("—");
    expect(formatDuration(-Infinity)).toBe("—");
  });
});

describe("formatDurationRounded", () => {
  it("is formatDuration's text without the marker, so a sentence that says 'about' or '≈' never doubles it", () => {
    expect(formatDurationRounded(200_000_000)).toBe("55 h 33 min");
    expect(formatDurationRounded(3_605_000)).toBe("1 h");
    for (const ms of [0, 450, 2_500, 59_500, 90_000, 3_599_000, 3_930_000, 86_400_000, -200_000_000, Number.NaN]) {
      expect(formatDurationRounded(ms)).toBe(formatDuration(ms).replace("≈", ""));
      expect(`≈ ${formatDurationRounded(ms)}`).not.toContain("≈≈");
    }
  });
});

describe("formatAgo", () => {
  it("'just now' under 2 s and for a clock that runs ahead; otherwise the rounded age", () => {
    expect(formatAgo(0)).toBe("just now");
    expect(formatAgo(1_999)).toBe("just now");
    expect(formatAgo(-5_000)).toBe("just now");
    expect(formatAgo(2_000)).toBe("2 s ago");
    expect(formatAgo(90_000)).toBe("90 s ago");
    expect(formatAgo(3_605_000)).toBe("1 h ago");
    expect(formatAgo(Number.NaN)).toBe("—");
  });
});

describe("formatSeconds", () => {
  it("whole seconds, rounded, thousands separated: the number a budget setting names", () => {
    expect(formatSeconds(0)).toBe("0 s");
    expect(formatSeconds(400)).toBe("0 s");
    expect(formatSeconds(500)).toBe("1 s");
    expect(formatSeconds(59_500)).toBe("60 s");
    expect(formatSeconds(90_000)).toBe("90 s");
    expect(formatSeconds(1_234_000)).toBe("1,234 s");
    expect(formatSeconds(3_599_000)).toBe("3,599 s");
    expect(formatSeconds(86_400_000)).toBe("86,400 s");
  });

  it("negative keeps its sign but never reads '-0 s'; NaN reads '—'", () => {
    expect(formatSeconds(-90_000)).toBe("-90 s");
    expect(formatSeconds(-400)).toBe("0 s");
    expect(formatSeconds(Number.NaN)).toBe("—");
  });
});

describe("formatWaitSeconds", () => {
  it("rounds up and is at least 1 s: a wait is never announced shorter than it is", () => {
    expect(formatWaitSeconds(0)).toBe("1 s");
    expect(formatWaitSeconds(-3_000)).toBe("1 s");
    expect(formatWaitSeconds(200)).toBe("1 s");
    expect(formatWaitSeconds(46_001)).toBe("47 s");
    expect(formatWaitSeconds(90_000)).toBe("90 s");
    expect(formatWaitSeconds(1_233_400)).toBe("1,234 s");
    expect(formatWaitSeconds(Number.NaN)).toBe("—");
  });
});

describe("formatEstimate", () => {
  it("marks an estimate once, whatever the rounding: never '≈≈', never a bare number", () => {
    expect(formatEstimate(90_000)).toBe("≈ 90 s");
    expect(formatEstimate(540_000)).toBe("≈ 9 min");
    expect(formatEstimate(200_000_000)).toBe("≈ 55 h 33 min");
    expect(formatEstimate(3_605_000)).toBe("≈ 1 h");
    expect(formatEstimate(Number.NaN)).toBe("—");
    for (const ms of [0, 450, 2_500, 90_000, 3_605_000, 200_000_000])
      expect(formatEstimate(ms).match(/≈/g)).toHaveLength(1);
  });
});

describe("one way to show a duration", () => {
  const root = join(import.meta.dirname, "../..");
  const sources = (dir: string): string[] =>
    readdirSync(dir).flatMap((entry) => {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) return entry === "node_modules" ? [] : sources(path);
      return /\.tsx?$/.test(entry) && !/\.(test|spec)\.tsx?$/.test(entry) ? [path] : [];
    });

  it("no code writes '≈' beside a formatted duration itself: the marker comes from this module", () => {
    const offenders = ["app", "lib", "workers"].flatMap((dir) =>
      sources(join(root, dir)).flatMap((file) =>
        readFileSync(file, "utf8")
          .split("\n")
          .map((line, i) => ({ line, at: `${file.slice(root.length + 1)}:${i + 1}` }))
          .filter(({ line }) => /≈\s*\$\{\s*format(Duration|DurationRounded|Seconds|Ago|WaitSeconds)\(/.test(line))
          .map(({ at }) => at),
      ),
    );
    expect(offenders).toEqual([]);
  });
});
