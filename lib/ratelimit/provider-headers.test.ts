import { describe, expect, it } from "vitest";
import { formatResetDuration, parseResetDuration, pauseOf429, readAnnouncedLimits } from "./provider-headers";

const lookup = (headers: Record<string, string>) => (name: string) => headers[name.toLowerCase()];

describe("the providers' rate-limit headers", () => {
  it.each([
    ["6m0s", 360_000],
    ["1.5s", 1_500],
    ["20ms", 20],
    ["1h2m3s", 3_723_000],
    ["0s", 0],
    ["59.999s", 59_999],
    ["7", 7_000],
  ])("reads OpenAI's reset %j as %d ms", (text, ms) => {
    expect(parseResetDuration(text)).toBeCloseTo(ms, 6);
  });

  it.each(["", "soon", "5 minutes", "1x"])("reads nothing from %j", (text) => {
    expect(parseResetDuration(text)).toBeUndefined();
  });

  it("writes durations as OpenAI does, and reads back what it writes", () => {
    expect([20, 999, 1_500, 59_999, 60_000, 360_000, 3_723_000].map(formatResetDuration)).toEqual([
      "20ms",
      "999ms",
      "1.5s",
      "59.999s",
      "1m0s",
      "6m0s",
      "1h2m3s",
    ]);
    for (const ms of [1, 20, 1_500, 61_250, 3_723_000]) expect(parseResetDuration(formatResetDuration(ms))).toBe(ms);
  });

  it("reads OpenAI's limits: requests and tokens, remaining and reset", () => {
    const h = lookup({
      "x-ratelimit-limit-requests": "500",
      "x-ratelimit-remaining-requests": "499",
      "x-ratelimit-reset-requests": "120ms",
      "x-ratelimit-limit-tokens": "30000",
      "x-ratelimit-remaining-tokens": "29100",
      "x-ratelimit-reset-tokens": "1.8s",
    });
    expect(readAnnouncedLimits(h)).toEqual({
      requests: { limit: 500, remaining: 499, resetMs: 120 },
      tokens: { tokens: { limit: 30_000, remaining: 29_100, resetMs: 1_800 } },
    });
  });

  it("reads Anthropic's input and output token limits apart, their resets as times", () => {
    const now = Date.parse("2026-12-04T06:00:00Z");
    const h = lookup({
      "anthropic-ratelimit-requests-limit": "50",
      "anthropic-ratelimit-requests-remaining": "49",
      "anthropic-ratelimit-requests-reset": "2026-12-04T06:00:01Z",
      "anthropic-ratelimit-input-tokens-limit": "40000",
      "anthropic-ratelimit-input-tokens-remaining": "39000",
      "anthropic-ratelimit-input-tokens-reset": "2026-12-04T06:00:02Z",
      "anthropic-ratelimit-output-tokens-limit": "8000",
      "anthropic-ratelimit-output-tokens-remaining": "7900",
      "anthropic-ratelimit-output-tokens-reset": "2026-12-04T06:00:03Z",
    });
    expect(readAnnouncedLimits(h, now)).toEqual({
      requests: { limit: 50, remaining: 49, resetMs: 1_000 },
      tokens: {
        input: { limit: 40_000, remaining: 39_000, resetMs: 2_000 },
        output: { limit: 8_000, remaining: 7_900, resetMs: 3_000 },
      },
    });
  });

  it("reads nothing from an answer without rate-limit headers", () => {
    expect(readAnnouncedLimits(lookup({ "content-type": "application/json" }))).toBeUndefined();
  });

  it("takes a 429's wait from retry-after-ms, retry-after, or else the reset it announces", () => {
    expect(pauseOf429(lookup({ "retry-after-ms": "1250", "retry-after": "2" }))).toBe(1_250);
    expect(pauseOf429(lookup({ "retry-after": "3" }))).toBe(3_000);
    expect(pauseOf429(lookup({ "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-reset-requests": "1.5s" }))).toBe(
      1_500,
    );
    expect(pauseOf429(lookup({}))).toBeUndefined();
  });
});
