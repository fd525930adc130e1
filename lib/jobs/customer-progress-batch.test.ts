import { describe, expect, it } from "vitest";
import { customerSentence, OPERATOR_WORDS, type CustomerBatch } from "./customer-progress";

const batch: CustomerBatch = {
  rows: 1_000,
  expectedBy: new Date("2026-12-04T11:00:00Z"),
  lastMomentAt: new Date("2026-12-04T12:50:00Z"),
  deadlineAt: new Date("2026-12-04T13:00:00Z"),
  endedAt: null,
  fallback: null,
};
const base = { kind: "csv_import", noun: "row", total: 1_000, processed: 0, failed: 0 } as const;

describe("customerSentence: a job on the batch lane", () => {
  it("while it waits: with the provider's batch service, expected by …, finished directly by the deadline", () => {
    const s = customerSentence({
      ...base,
      status: "delayed",
      batch,
      waitMessage: "Waiting 1 min for a busy outside service",
    });
    expect(s.message).toBe(
      "Your remaining 1,000 rows are with the provider's batch service, expected by 11:00 UTC. Whatever it has not answered by 12:50 UTC is finished directly, so that the import is done by 13:00 UTC. It goes on by itself; this page updates when it does.",
    );
    expect(s.message).not.toMatch(OPERATOR_WORDS);
  });

  it("counts the rows that wait on the batch, not the questions sent (rows sharing a question send one)", () => {
    const s = customerSentence({ ...base, processed: 100, status: "delayed", batch: { ...batch, rows: 40 } });
    expect(s.message).toMatch(/^Your remaining 900 rows are with the provider's batch service/);
  });

  it("when it falls back: the batch's answers are kept and the rest is finishing directly", () => {
    const s = customerSentence({
      ...base,
      status: "running",
      processed: 400,
      batch: { ...batch, endedAt: batch.lastMomentAt, fallback: "the batch was not done by the last moment" },
    });
    expect(s.message).toBe(
      "Importing your rows: 400 of 1,000 rows done so far. The provider's batch service did not answer every row in time: its answers are kept, and the rest is finishing directly, to be done by 13:00 UTC.",
    );
  });

  it("says nothing of the batch once it completed and its answers are being imported", () => {
    const s = customerSentence({
      ...base,
      status: "running",
      processed: 10,
      batch: { ...batch, endedAt: batch.expectedBy },
    });
    expect(s.message).toBe("Importing your rows: 10 of 1,000 rows done so far.");
  });
});
