import { describe, expect, it } from "vitest";
import { MAX_PRIORITY, priorityForOpenRows, RETRY_PRIORITY } from "./fairness";
import { enqueueJob } from "./queues";

describe("priorityForOpenRows", () => {
  it("a tenant's n-th open job waits at n + 1: its first at 2, behind retries (1)", () => {
    expect(RETRY_PRIORITY).toBe(1);
    expect([1, 2, 3, 96].map(priorityForOpenRows)).toEqual([2, 3, 4, 97]);
  });

  it("a fresh job never ties with a retry, and never passes BullMQ's largest priority", () => {
    expect(priorityForOpenRows(0)).toBe(2);
    expect(priorityForOpenRows(MAX_PRIORITY + 10)).toBe(MAX_PRIORITY);
    expect(MAX_PRIORITY).toBe(2 ** 21);
  });
});

describe("enqueueJob", () => {
  it("refuses a queue job without a place in line (BullMQ would serve priority 0 before everyone), before touching the queue", async () => {
    const payload = { jobId: "00000000-0000-4000-8000-000000000000" };
    for (const priority of [0, -1, 2.5, MAX_PRIORITY + 1])
      await expect(enqueueJob("imports", "csv_import", payload, { priority })).rejects.toThrow(RangeError);
  });
});
