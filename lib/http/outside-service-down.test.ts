import { describe, expect, it } from "vitest";
import { OutsideServiceDown } from "@/lib/ratelimit/errors";
import { toErrorResponse } from "./api";

describe("an outside service that is down, outside a job", () => {
  it("is a 503 that says which service, since when and when to come back, with Retry-After", async () => {
    const down = new OutsideServiceDown(
      "marketplace",
      12_300,
      new Date("2026-12-03T14:02:00Z"),
      "Error: connect ECONNREFUSED 127.0.0.1:4010",
      "the marketplace",
    );
    const response = toErrorResponse(down, "test");
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("13");
    const body = await response.json();
    expect(body.error.code).toBe("outside_service_down");
    expect(body.error.message).toBe(
      "The marketplace is down since 2026-12-03T14:02:00.000Z (Error: connect ECONNREFUSED 127.0.0.1:4010); nothing is sent to it until it answers again. Try again in 13 s.",
    );
  });
});
