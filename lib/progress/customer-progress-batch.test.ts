import { describe, expect, it } from "vitest";
import { customerSentence, OPERATOR_WORDS, toCustomerProgress, type CustomerBatch } from "./customer-progress";
import type { Progress } from "@/lib/job-views/queries";

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

describe("toCustomerProgress: the time left of a job waiting on its batch", () => {
  const progress: Progress = {
    title: "Importing march.csv",
    removedByRetention: null,
    noun: "row",
    status: "delayed",
    terminal: false,
    total: 1_000,
    processed: 0,
    failed: 0,
    message: "Waiting for batch:b1 (…); it looks again in 60 s.",
    filename: "march.csv",
    createdAt: "2026-12-04T10:00:00.000Z",
    startedAt: "2026-12-04T10:00:00.000Z",
    finishedAt: null,
    updatedAt: "2026-12-04T10:00:01.000Z",
    etaSeconds: null,
    expectedFinishAt: null,
    rate: null,
    failures: [],
    // The job's next look at its batch: no time left for the customer.
    waitSeconds: 60,
  };

  it("is the time to the batch's expected time, not the next look at it", () => {
    const p = toCustomerProgress(progress, "csv_import", "t", null, false, batch, new Date("2026-12-04T10:30:00Z"));
    expect(p.waitSeconds).toBeUndefined();
    expect(p.etaSeconds).toBe(30 * 60);
    expect(p.expectedFinishAt).toBe("2026-12-04T11:00:00.000Z");
    expect(p.statusLabel).toBe("With the batch service");
  });

  it("once the expected time passed, the time to the deadline the job keeps", () => {
    const p = toCustomerProgress(progress, "csv_import", "t", null, false, batch, new Date("2026-12-04T11:10:00Z"));
    expect(p.etaSeconds).toBe(110 * 60);
    expect(p.expectedFinishAt).toBe("2026-12-04T13:00:00.000Z");
  });

  it("leaves any other wait's countdown as it is", () => {
    const p = toCustomerProgress(progress, "csv_import", "t", null, false, null, new Date("2026-12-04T10:30:00Z"));
    expect(p.waitSeconds).toBe(60);
    expect(p.etaSeconds).toBeNull();
  });
});
