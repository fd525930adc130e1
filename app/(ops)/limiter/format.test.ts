import { describe, expect, it } from "vitest";
import { describeWaiting } from "./format";

const asOf = "2026-12-07T03:00:00.000Z";
const at = (ms: number) => Date.parse(asOf) + ms;

describe("who waits for a provider's slots", () => {
  it("says nobody when no tenant and no urgent call waits", () => {
    expect(describeWaiting({ tenants: 0, urgent: 0, nearestDeadlineAt: null }, asOf, 1)).toBe("nobody");
  });

  it("counts the tenants and the urgent calls, with the nearest deadline in production time", () => {
    expect(describeWaiting({ tenants: 1, urgent: 0, nearestDeadlineAt: null }, asOf, 1)).toBe("1 tenant");
    expect(describeWaiting({ tenants: 2, urgent: 1, nearestDeadlineAt: at(45_000) }, asOf, 1)).toBe(
      "2 tenants; 1 urgent call, its deadline in 45 s",
    );
    // At time scale 0.1, 4.5 real seconds are 45 production seconds.
    expect(describeWaiting({ tenants: 0, urgent: 3, nearestDeadlineAt: at(4_500) }, asOf, 0.1)).toBe(
      "3 urgent calls, the nearest deadline in 45 s",
    );
  });

  it("says a deadline that has gone by is passed, never a negative time", () => {
    expect(describeWaiting({ tenants: 0, urgent: 1, nearestDeadlineAt: at(-5_000) }, asOf, 1)).toBe(
      "1 urgent call, its deadline passed",
    );
  });
});
