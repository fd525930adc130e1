import { describe, expect, it } from "vitest";
import { safeNext } from "./safe-next";

describe("safeNext: after signing in, only paths of this site", () => {
  it.each([
    ["/jobs?status=completed", "/jobs?status=completed"],
    ["/jobs/abc#failures", "/jobs/abc#failures"],
    ["//evil.example", "/"],
    ["/\\evil.example", "/"],
    ["/\t/evil.example", "/"],
    ["/\n/evil.example", "/"],
    ["https://evil.example/x", "/"],
    ["/.//evil.example", "/"],
    ["/x/..//evil.example", "/"],
    ["/%2e//evil.example", "/"],
    ["javascript:alert(1)", "/"],
    ["", "/"],
  ])("%j → %j", (input, expected) => {
    expect(safeNext(input)).toBe(expected);
  });

  it("takes nothing that is not a string", () => {
    expect(safeNext(null)).toBe("/");
    expect(safeNext(42)).toBe("/");
  });
});
