import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { nodeFetch } from "@/lib/http/node-fetch";
import { closeRedis } from "@/lib/redis/client";
import { batchRowsOf, type ModelSimulatorOptions } from "@/workers/simulators/model";
import { startSimulators, type RunningSimulators } from "@/workers/simulators/server";
import { createCategoriser, type CategoriserOptions } from "./categoriser";
import type { ModelFetch } from "./chat-completion";
import type { CategorisableTransaction } from "./choose-category";
import { ModelCallError } from "./errors";
import { flushModelCallRecords, recordModelCall, type ModelCallRecord } from "./record";
import type { ChatMessage } from "./schemas";

/** Every ModelCall row this file writes carries this queue name, and only these rows are read. */
const queue = `categoriser-test-${randomUUID()}`;

class DeadlineProbe extends Error {
  override name = "DeadlineProbe";
}

const CATEGORIES = [
  { slug: "groceries", name: "Groceries" },
  { slug: "transport", name: "Transport" },
  { slug: "entertainment", name: "Entertainment" },
  { slug: "other", name: "Other" },
];
/** Counterparties the simulated model recognises, and the slug each one gets. */
const COUNTERPARTIES = [
  ["REWE Markt", "groceries"],
  ["Deutsche Bahn", "transport"],
  ["Netflix", "entertainment"],
  ["Acme GmbH", "other"],
] as const;

function transaction(row: number, description = `card payment ${row}`): CategorisableTransaction {
  return {
    date: "2026-01-04",
    amount: `-${row}.50`,
    currency: "EUR",
    counterparty: COUNTERPARTIES[row % COUNTERPARTIES.length]![0],
    description,
  };
}
const expectedSlug = (row: number) => COUNTERPARTIES[row % COUNTERPARTIES.length]![1];

const sims: RunningSimulators[] = [];
async function simulator(options: ModelSimulatorOptions = {}): Promise<RunningSimulators> {
  // A fixed latency: these tests are about which calls are made, not how long they take.
  const started = await startSimulators({
    port: 0,
    model: { errorRate: 0, timeScale: 0.001, latencyMs: () => 5_500, ...options },
  });
  sims.push(started);
  return started;
}

/** What went over the wire: each request's messages as sent, and each recorded attempt. */
function observed() {
  const requests: { at: number; messages: ChatMessage[] }[] = [];
  const records: ModelCallRecord[] = [];
  const fetch: ModelFetch = (url, init) => {
    requests.push({
      at: performance.now(),
      messages: (JSON.parse(init!.body as string) as { messages: ChatMessage[] }).messages,
    });
    return nodeFetch(url, init);
  };
  const record = (call: ModelCallRecord) => {
    records.push(call);
    return recordModelCall(call);
  };
  return {
    requests,
    records,
    fetch,
    record,
    /** The rows each request asked about, by id for a batch and by description for a single row. */
    batches: () => requests.map((r) => batchRowsOf(r.messages)?.map((row) => row.id) ?? null),
    singles: () => requests.filter((r) => !batchRowsOf(r.messages)).map((r) => r.messages.at(-1)!.content),
  };
}

function categoriser(
  sim: RunningSimulators,
  seen: ReturnType<typeof observed>,
  options: Partial<CategoriserOptions> = {},
) {
  return createCategoriser({
    categories: CATEGORIES,
    batchSize: 8,
    context: { queue, jobKind: "categoriser" },
    signal: new AbortController().signal,
    baseUrl: sim.modelBaseUrl,
    maxRetries: 0,
    fetch: seen.fetch,
    record: seen.record,
    ...options,
  });
}

let sim: RunningSimulators;
beforeAll(async () => {
  sim = await simulator();
});

afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await flushModelCallRecords();
  await db().modelCall.deleteMany({ where: { queue } });
  await closeDb();
  await closeRedis();
});

describe("createCategoriser against the model simulator", () => {
  it("N concurrent rows make ⌈N / batchSize⌉ model calls, each recorded with its batch size, and every row gets its own category", async () => {
    const seen = observed();
    const c = categoriser(sim, seen);
    const rows = Array.from({ length: 20 }, (_, i) => i + 2);

    const slugs = await Promise.all(rows.map((row) => c.categorise(transaction(row), row)));
    c.close();

    expect(slugs).toEqual(rows.map(expectedSlug));
    expect(seen.requests).toHaveLength(Math.ceil(20 / 8));
    // Sent at once, so they may reach the provider in any order (the first may ask alone while no
    // token limit is known yet): the batches, not their order on the wire.
    const byFirstRow = (b: string[] | null) => Number(b?.[0] ?? Infinity);
    expect([...seen.batches()].sort((a, b) => byFirstRow(a) - byFirstRow(b))).toEqual(
      [rows.slice(0, 8), rows.slice(8, 16), rows.slice(16)].map((b) => b.map(String)),
    );
    // Recorded as each call ends: the smaller batch is the quicker one, so the order is not the sending order.
    expect(seen.records.map((r) => [r.outcome, r.batchSize]).sort()).toEqual([
      ["ok", 4],
      ["ok", 8],
      ["ok", 8],
    ]);
    await flushModelCallRecords();
    expect(await db().modelCall.count({ where: { queue, jobKind: "categoriser" } })).toBeGreaterThanOrEqual(3);
  });

  it("a batch answer that omits rows ends with exactly those rows asked again one by one; the answered rows are not asked again", async () => {
    const seen = observed();
    const c = categoriser(sim, seen);
    const rows = [2, 3, 4, 5, 6, 7, 8, 9];
    const omitted = new Set([4, 7]);

    const slugs = await Promise.all(
      rows.map((row) =>
        c.categorise(transaction(row, omitted.has(row) ? `sim:omit ${row}` : `card payment ${row}`), row),
      ),
    );
    c.close();

    expect(slugs).toEqual(rows.map(expectedSlug));
    expect(seen.batches()).toEqual([rows.map(String), null, null]);
    const singles = seen.singles();
    expect(singles.some((p) => p.includes("sim:omit 4"))).toBe(true);
    expect(singles.some((p) => p.includes("sim:omit 7"))).toBe(true);
    expect(seen.records.map((r) => r.batchSize)).toEqual([8, 1, 1]);
  });

  it("a row answered with a slug that is not in the list is asked again on its own, and only that row", async () => {
    const seen = observed();
    const c = categoriser(sim, seen);
    const rows = [10, 11, 12];

    const slugs = await Promise.all(
      rows.map((row) => c.categorise(transaction(row, row === 11 ? "sim:bad-slug" : "card payment"), row)),
    );
    c.close();

    expect(slugs).toEqual(rows.map(expectedSlug));
    expect(seen.batches()).toEqual([["10", "11", "12"], null]);
    expect(seen.singles()[0]).toContain("sim:bad-slug");
  });

  it("a batch answer that is not JSON ends with every row of the batch asked again one by one", async () => {
    const seen = observed();
    const c = categoriser(sim, seen);
    const rows = [2, 3, 4, 5, 6];

    const slugs = await Promise.all(
      rows.map((row) => c.categorise(transaction(row, row === 3 ? "sim:garbage" : `card payment ${row}`), row)),
    );
    c.close();

    expect(slugs).toEqual(rows.map(expectedSlug));
    expect(seen.batches()).toEqual([rows.map(String), null, null, null, null, null]);
    expect(seen.records.map((r) => r.batchSize)).toEqual([5, 1, 1, 1, 1, 1]);
  });

  it("reads a batch answer wrapped in a code fence and sentences without asking any row again", async () => {
    const seen = observed();
    const c = categoriser(sim, seen);
    const rows = [2, 3, 4];

    const slugs = await Promise.all(rows.map((row) => c.categorise(transaction(row, `sim:chatty ${row}`), row)));
    c.close();

    expect(slugs).toEqual(rows.map(expectedSlug));
    expect(seen.requests).toHaveLength(1);
  });

  it("one row alone goes out after the linger, as a single-row call, without waiting for a full batch", async () => {
    const seen = observed();
    const lingerMs = 40;
    const c = categoriser(sim, seen, { batchSize: 8, lingerMs });

    const asked = performance.now();
    const slug = await c.categorise(transaction(5), 5);
    c.close();

    expect(slug).toBe(expectedSlug(5));
    expect(seen.requests).toHaveLength(1);
    const waited = seen.requests[0]!.at - asked;
    expect(waited).toBeGreaterThanOrEqual(lingerMs - 1);
    // Nowhere near what waiting for seven more rows would be (never, here): the linger, plus a little.
    expect(waited).toBeLessThan(lingerMs + 500);
    expect(seen.batches()).toEqual([null]);
    expect(seen.records.map((r) => r.batchSize)).toEqual([1]);
  });

  it("a batch call that fails after its retries rejects every row of the batch with that error, and no row is asked again", async () => {
    const failing = await simulator({ errorRate: 1 });
    const seen = observed();
    const c = categoriser(failing, seen, { maxRetries: 1 });
    const rows = [2, 3, 4];

    const results = await Promise.allSettled(rows.map((row) => c.categorise(transaction(row), row)));
    c.close();

    const errors = results.map((r) => (r.status === "rejected" ? r.reason : r.value));
    expect(errors[0]).toBeInstanceOf(ModelCallError);
    expect(errors[0]).toMatchObject({ status: 500, attempts: 2 });
    expect(errors.every((e) => e === errors[0])).toBe(true);
    expect(seen.batches()).toEqual([
      ["2", "3", "4"],
      ["2", "3", "4"],
    ]);
  });

  it("an abort rejects rows still waiting for their batch with the signal's reason, and sends nothing", async () => {
    const seen = observed();
    const controller = new AbortController();
    const reason = new DeadlineProbe("soft limit reached");
    const c = categoriser(sim, seen, { signal: controller.signal, lingerMs: 60_000 });

    const pending = [2, 3, 4].map((row) => c.categorise(transaction(row), row));
    controller.abort(reason);

    for (const p of pending) await expect(p).rejects.toBe(reason);
    await expect(c.categorise(transaction(5), 5)).rejects.toBe(reason);
    c.close();
    expect(seen.requests).toHaveLength(0);
  });

  it("an abort rejects the rows of a batch in flight with the signal's reason, and the simulator stops waiting", async () => {
    // A minute-long call at time scale 1: only the abort can end it within the test.
    const slow = await simulator({ timeScale: 1, latencyMs: () => 60_000 });
    const seen = observed();
    const controller = new AbortController();
    const reason = new DeadlineProbe("soft limit reached");
    const c = categoriser(slow, seen, { signal: controller.signal, batchSize: 2 });

    const pending = [2, 3].map((row) => c.categorise(transaction(row), row));
    await vi.waitFor(() => expect(slow.model.inFlight()).toBe(1));
    controller.abort(reason);

    for (const p of pending) await expect(p).rejects.toBe(reason);
    c.close();
    expect(seen.records.map((r) => [r.outcome, r.batchSize])).toEqual([["aborted", 2]]);
    await vi.waitFor(() => expect(slow.model.inFlight()).toBe(0), { timeout: 2_000 });
  });

  it("a batch the model holds far past its tail is sent again in a spare slot: its rows get the second request's answers, and the first request is cancelled", async () => {
    // The first request takes ten production hours (36 s here), every later one 5.5 s (5.5 ms).
    let requests = 0;
    const tail = await simulator({ latencyMs: () => (++requests === 1 ? 36_000_000 : 5_500) });
    const seen = observed();
    // An attempt timeout far beyond the hedge's delay (3 s at this time scale), so only the hedge can answer in time.
    const c = categoriser(tail, seen, { batchSize: 2, attemptTimeoutMs: 20_000_000 });

    const slugs = await Promise.all([2, 3].map((row) => c.categorise(transaction(row), row)));
    c.close();

    expect(slugs).toEqual([2, 3].map(expectedSlug));
    expect(seen.batches()).toEqual([
      ["2", "3"],
      ["2", "3"],
    ]);
    await vi.waitFor(() => expect(tail.model.inFlight()).toBe(0), { timeout: 2_000 });
    await vi.waitFor(() => expect(seen.records).toHaveLength(2));
    expect(seen.records.map((r) => [r.outcome, r.batchSize, r.error ?? null]).sort()).toEqual([
      ["ok", 2, null],
      ["superseded", 2, "cancelled: the same request sent again answered first"],
    ]);
  });

  it("close rejects rows not yet sent and refuses new ones", async () => {
    const seen = observed();
    const c = categoriser(sim, seen, { lingerMs: 60_000 });

    const pending = c.categorise(transaction(2), 2);
    c.close();

    await expect(pending).rejects.toThrow(/closed/);
    await expect(c.categorise(transaction(3), 3)).rejects.toThrow(/closed/);
    expect(seen.requests).toHaveLength(0);
  });
});
