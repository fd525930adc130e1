import { describe, expect, it } from "vitest";
import {
  CUSTOMER_STATUS_LABEL,
  customerReason,
  customerSentence,
  otherModelsSentence,
  toCustomerProgress,
} from "./customer-progress";
import type { Progress } from "@/lib/job-views/queries";
import { JOB_STATUSES, type JobStatus } from "@/lib/core/job-statuses";

/** What the customer must never read: how the work is run, not what it does for them. */
const OPERATOR_TERMS = /split|p99|budget|admin|soft|hard limit|reaper|attempt|cursor|tenant/i;

const KINDS = [
  "csv_import",
  "bulk_ocr",
  "agent_run",
  "overdue_invoices",
  "marketplace_sync",
  "card_generation",
  "unknown_kind",
];
const NOUN: Record<string, string> = {
  csv_import: "row",
  bulk_ocr: "document",
  agent_run: "step",
  overdue_invoices: "invoice",
  marketplace_sync: "page",
  card_generation: "card",
  unknown_kind: "item",
};

function progress(status: JobStatus, over: Partial<Progress> = {}): Progress {
  const terminal = !["queued", "running", "delayed"].includes(status);
  return {
    removedByRetention: null,
    title: "Importing january.csv",
    noun: "row",
    status,
    terminal,
    total: 2_000,
    processed: 1_960,
    failed: 0,
    // What a worker writes for the operators: none of it may reach the customer.
    message:
      "Timed out after 1,960 of 2,000 rows (budget 600 s). Split the file or retry the remaining rows. Split by admin; p99 35 s × 40 rows > soft limit.",
    filename: "january.csv",
    createdAt: "2026-12-01T10:00:00.000Z",
    startedAt: "2026-12-01T10:00:01.000Z",
    finishedAt: terminal ? "2026-12-01T10:10:00.000Z" : null,
    updatedAt: "2026-12-01T10:10:00.000Z",
    etaSeconds: null,
    expectedFinishAt: null,
    rate: null,
    failures: [],
    ...over,
  };
}

describe("customerSentence: plain words for every status", () => {
  it("has a sentence for every status and kind, with counts and without an operator term", () => {
    for (const kind of KINDS) {
      for (const status of JOB_STATUSES) {
        for (const [processed, failed, total] of [
          [0, 0, 2_000],
          [1_960, 0, 2_000],
          [1_950, 10, 2_000],
          [1_990, 10, 2_000],
          [7, 0, null],
        ] as const) {
          const s = customerSentence({ kind, noun: NOUN[kind]!, status, total, processed, failed });
          const text = `${s.message} ${s.next ?? ""}`;
          expect(text, `${kind} ${status}`).not.toMatch(OPERATOR_TERMS);
          expect(s.message.length, `${kind} ${status}`).toBeGreaterThan(10);
          expect(text).not.toMatch(/undefined|null|NaN/);
        }
      }
    }
  });

  it("a finished import says what was imported, and what to do with the rows that were not", () => {
    expect(
      customerSentence({
        kind: "csv_import",
        noun: "row",
        status: "completed",
        total: 2_000,
        processed: 2_000,
        failed: 0,
      }),
    ).toEqual({ message: "Imported all 2,000 rows.", next: null });
    expect(
      customerSentence({ kind: "csv_import", noun: "row", status: "completed", total: 1, processed: 1, failed: 0 })
        .message,
    ).toBe("Imported the 1 row.");
    const withErrors = customerSentence({
      kind: "csv_import",
      noun: "row",
      status: "completed_with_errors",
      total: 2_000,
      processed: 1_980,
      failed: 20,
    });
    expect(withErrors.message).toBe(
      "Imported 1,980 of 2,000 rows; 20 rows could not be imported (see the list below).",
    );
    expect(withErrors.next).toMatch(/Download the rows that could not be imported .* upload that file again/);
    // Once its detail is pruned there is no list to point at, nor a file to download.
    const pruned = customerSentence({
      kind: "csv_import",
      noun: "row",
      status: "completed_with_errors",
      total: 2_000,
      processed: 1_980,
      failed: 20,
      failuresRemoved: true,
    });
    expect(pruned).toEqual({
      message: "Imported 1,980 of 2,000 rows; 20 rows could not be imported.",
      next: "The list of the rows that could not be imported was removed with this job's details; send them again as a new job if you still need them.",
    });
    expect(
      customerSentence({ kind: "bulk_ocr", noun: "document", status: "completed", total: 2, processed: 2, failed: 0 })
        .message,
    ).toBe("Read all 2 documents.");
  });

  it("a job that stopped early says what is kept, what is left, and that our team continues it — never that it continues by itself, nor to split the file", () => {
    for (const status of ["timed_out", "killed", "failed", "abandoned"] as const) {
      const s = customerSentence({
        kind: "csv_import",
        noun: "row",
        status,
        total: 2_000,
        processed: 1_960,
        failed: 0,
      });
      expect(s.message, status).toContain("1,960 of 2,000 rows");
      expect(s.next, status).toBe(
        "Nothing is lost: the 1,960 rows already imported are kept. Our team has been told and will continue it; you don't need to upload again. It goes on from where the import stopped with the remaining 40 rows, without doing any row twice, and this page updates by itself when it does.",
      );
      expect(s.next, status).not.toMatch(/continues by itself|will be resumed|send anything again/);
    }
    expect(
      customerSentence({ kind: "agent_run", noun: "step", status: "timed_out", total: 40, processed: 3, failed: 0 })
        .next,
    ).toContain("Our team has been told and will continue it; you don't need to start it again.");
    expect(
      customerSentence({
        kind: "csv_import",
        noun: "row",
        status: "timed_out",
        total: 2_000,
        processed: 1_960,
        failed: 0,
      }).message,
    ).toBe("Paused after 1,960 of 2,000 rows: this took longer than expected.");
  });

  it("a resumed job in line names what is left; a fresh one just starts shortly", () => {
    expect(
      customerSentence({ kind: "csv_import", noun: "row", status: "queued", total: 2_000, processed: 0, failed: 0 })
        .message,
    ).toBe("In line: it starts shortly.");
    expect(
      customerSentence({ kind: "csv_import", noun: "row", status: "queued", total: 2_000, processed: 1_960, failed: 0 })
        .message,
    ).toBe("Resuming where it stopped: 40 rows to go, starting shortly. The 1,960 rows already imported are kept.");
  });

  it("running: how far along; waiting: the wait sentence the progress query made", () => {
    expect(
      customerSentence({ kind: "csv_import", noun: "row", status: "running", total: 2_000, processed: 500, failed: 3 })
        .message,
    ).toBe("Importing your rows: 503 of 2,000 rows done so far; 3 rows could not be imported.");
    const wait = "Waiting 47 s for the marketplace's rate limit; it goes on by itself.";
    expect(
      customerSentence({
        kind: "marketplace_sync",
        noun: "page",
        status: "delayed",
        total: null,
        processed: 3,
        failed: 0,
        waitMessage: wait,
      }).message,
    ).toBe(wait);
  });
});

describe("toCustomerProgress", () => {
  it("never passes the operators' message through, for any status", () => {
    for (const status of JOB_STATUSES) {
      const view = toCustomerProgress(progress(status), "csv_import", "a".repeat(32));
      expect(JSON.stringify(view)).not.toMatch(OPERATOR_TERMS);
      expect(view.statusLabel).toBe(CUSTOMER_STATUS_LABEL[status]);
    }
  });

  it("offers the downloads of a finished import only: the result when rows were imported, the rows to fix when some failed", () => {
    const token = "b".repeat(32);
    expect(
      toCustomerProgress(progress("completed_with_errors", { processed: 1_980, failed: 20 }), "csv_import", token)
        .downloads,
    ).toEqual({
      result: `/api/progress/${token}/result.csv`,
      failedRows: `/api/progress/${token}/failed-rows.csv`,
    });
    expect(toCustomerProgress(progress("completed", { processed: 2_000 }), "csv_import", token).downloads).toEqual({
      result: `/api/progress/${token}/result.csv`,
      failedRows: null,
    });
    expect(toCustomerProgress(progress("running"), "csv_import", token).downloads).toBeNull();
    const removed = progress("completed_with_errors", { processed: 1_980, failed: 20, removedByRetention: "removed" });
    expect(toCustomerProgress(removed, "csv_import", token).downloads).toBeNull();
    expect(toCustomerProgress(progress("completed", { noun: "document" }), "bulk_ocr", token).downloads).toBeNull();
  });

  it("a failure reason that talks about how the work is run is replaced; a row's own reason is kept", () => {
    expect(customerReason("date must look like 2026-01-31", "row")).toBe("date must look like 2026-01-31");
    expect(customerReason("card attempt 2 timed out after 150 s", "card")).not.toMatch(OPERATOR_TERMS);
    const view = toCustomerProgress(
      progress("completed_with_errors", { failed: 1, failures: [{ row: 3, reason: "skipped by the reaper" }] }),
      "csv_import",
      "c".repeat(32),
    );
    expect(view.failures).toEqual([
      { row: 3, reason: "this row could not be processed; please check it and send it again" },
    ]);
  });
});

describe("rows answered by another model than the main one", () => {
  const main = "bounded-sim-1";
  it("says nothing when every row got the main model's answer", () => {
    expect(otherModelsSentence([{ model: main, rows: 88 }], main)).toBeNull();
    expect(otherModelsSentence([], main)).toBeNull();
  });

  it("says how many, and by which model, in plain words", () => {
    expect(
      otherModelsSentence(
        [
          { model: main, rows: 86 },
          { model: "bounded-sim-backup-1", rows: 2 },
        ],
        main,
      ),
    ).toBe("2 of 88 rows were answered by a backup model (bounded-sim-backup-1) instead of the main one.");
    expect(
      otherModelsSentence(
        [
          { model: "bounded-sim-backup-1", rows: 1 },
          { model: main, rows: 1 },
        ],
        main,
      ),
    ).toBe("1 of 2 rows was answered by a backup model (bounded-sim-backup-1) instead of the main one.");
    const all = otherModelsSentence([{ model: "b1", rows: 40 }], main);
    expect(all).toBe("All 40 rows were answered by a backup model (b1) instead of the main one.");
    expect(all).not.toMatch(OPERATOR_TERMS);
  });
});
