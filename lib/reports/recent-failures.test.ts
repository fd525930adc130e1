import { describe, expect, it } from "vitest";
import { failuresCard, RECENT_FAILURES_MS } from "./recent-failures";

const window = { windowMs: RECENT_FAILURES_MS };

describe("the overview's failure card", () => {
  it("is no alarm for items failed on their own input while every job ended well, and links to the jobs that hold them", () => {
    expect(failuresCard({ jobs: 0, items: 86, ...window })).toEqual({
      alert: false,
      href: "/jobs?status=completed_with_errors",
      note: "each for its own input; no job ended failed, timed out, stopped or abandoned",
    });
    expect(failuresCard({ jobs: 0, items: 0, ...window })).toMatchObject({
      alert: false,
      note: "no job ended failed, timed out, stopped or abandoned",
    });
  });

  it("is an alarm, linking to the failed jobs, once a job ended badly", () => {
    expect(failuresCard({ jobs: 2, items: 0, ...window })).toEqual({
      alert: true,
      href: "/jobs?status=failed",
      note: "and 2 jobs ended failed, timed out, stopped or abandoned",
    });
  });
});
