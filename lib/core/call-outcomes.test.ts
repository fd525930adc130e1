import { describe, expect, it } from "vitest";
import { failedCallCount } from "./call-outcomes";

describe("failedCallCount", () => {
  it("counts failed calls and calls their job cut, never a hedge's superseded twin", () => {
    expect(failedCallCount({ ok: 1_200, error: 85, aborted: 4, superseded: 16 })).toBe(89);
    expect(failedCallCount({ ok: 10, error: 0, aborted: 0, superseded: 3 })).toBe(0);
  });
});
