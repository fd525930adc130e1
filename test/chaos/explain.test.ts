import { describe, expect, it } from "vitest";
import { explainFindings, type Fault } from "./explain";

const START = Date.parse("2026-12-06T02:00:00Z");
const faults: Fault[] = [
  { what: "worker-2 SIGKILLed", from: START + 10_000, to: START + 10_000 },
  { what: "PostgreSQL stopped", from: START + 18_000, to: START + 48_000 },
  { what: "worker-1 SIGKILLed", from: START + 80_000, to: START + 80_000 },
];

describe("the chaos report's findings", () => {
  it("an unexpected failure names its job, row, reason, attempt and time, and the faults around that moment", () => {
    const [line] = explainFindings(
      [{ type: "failed", jobId: "j1", row: 151, reason: "amount is zero", attempt: 2, at: new Date(START + 20_000) }],
      faults,
      START,
    );
    expect(line).toBe(
      'job j1 row 151: recorded failed by attempt 2 at +20.0 s from the start, "amount is zero" — faults around it (from that moment): worker-2 SIGKILLed at −10.0 s; PostgreSQL stopped from −2.0 s to +28.0 s',
    );
  });

  it("a failure far from every fault says so", () => {
    const [line] = explainFindings(
      [{ type: "failed", jobId: "j1", row: 3, reason: "x", attempt: 1, at: new Date(START + 200_000) }],
      faults,
      START,
    );
    expect(line).toMatch(/no fault within 15 s$/);
  });

  it("a missing row names how its job ended and the faults in the job's life", () => {
    const [line] = explainFindings(
      [
        {
          type: "missing",
          jobId: "j2",
          row: 7,
          status: "completed",
          attempt: 3,
          createdAt: new Date(START + 70_000),
          updatedAt: new Date(START + 90_000),
        },
      ],
      faults,
      START,
    );
    expect(line).toBe(
      "job j2 row 7: never written; the job ended completed after attempt 3, alive from +70.0 s to +90.0 s from the start — faults in its life (from the start): worker-1 SIGKILLed at +80.0 s",
    );
  });
});
