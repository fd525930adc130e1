import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { closeDb, db } from "@/lib/db/client";
import { chatCompletion } from "@/lib/modelcalls/chat-completion";
import { chooseCategory } from "@/lib/modelcalls/choose-category";
import { ModelCallError } from "@/lib/modelcalls/errors";
import { flushModelCallRecords } from "@/lib/modelcalls/record";
import { breakerKey } from "@/lib/ratelimit/breaker";
import { isOutsideServiceDown } from "@/lib/ratelimit/errors";
import { redis } from "@/lib/redis/client";
import type { ModelSimulatorOptions } from "./model";
import { startSimulators, type RunningSimulators } from "./server";

/** Every ModelCall row this file writes carries this queue name, and only these rows are read. */
const queue = `sim-test-${randomUUID()}`;

/** A control signal of the kind jobs abort with; callers recognise it by class. */
class DeadlineProbe extends Error {
  override name = "DeadlineProbe";
}

async function recorded(jobKind: string) {
  await flushModelCallRecords();
  return db().modelCall.findMany({ where: { queue, jobKind }, orderBy: { id: "asc" } });
}

const messages = [
  { role: "user" as const, content: "Allowed categories (slug: name):\n- other: Other\n\nTransaction:\nx" },
];
const sims: RunningSimulators[] = [];
async function simulator(options: ModelSimulatorOptions): Promise<RunningSimulators> {
  const started = await startSimulators({ port: 0, model: options });
  sims.push(started);
  return started;
}

afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await flushModelCallRecords();
  await db().modelCall.deleteMany({ where: { queue } });
  await closeDb();
});

describe("model simulator through chatCompletion", () => {
  let fast: RunningSimulators;
  beforeAll(async () => {
    fast = await simulator({ errorRate: 0, timeScale: 0.001 });
  });

  it("answers health checks", async () => {
    const response = await fetch(`${fast.url}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true });
  });

  it("categorises a transaction and records the call as ok", async () => {
    const slug = await chooseCategory({
      transaction: {
        date: "2024-03-01",
        amount: "-23.40",
        currency: "EUR",
        counterparty: "REWE Markt",
        description: "Einkauf",
      },
      categories: [
        { slug: "groceries", name: "Groceries" },
        { slug: "transport", name: "Transport" },
        { slug: "other", name: "Other" },
      ],
      signal: new AbortController().signal,
      context: { queue, jobKind: "ok" },
      baseUrl: fast.modelBaseUrl,
    });
    expect(slug).toBe("groceries");
    const rows = await recorded("ok");
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ outcome: "ok", error: null, jobId: null });
    expect(rows[0]!.durationMs).toBeGreaterThanOrEqual(0);
  });

  // The model's circuit breaker (in Redis) would carry one test's failures into the next.
  beforeEach(async () => {
    await redis().del(breakerKey("model"));
  });

  it("fails with a ModelCallError after the retries when every call errors, each attempt recorded", async () => {
    const failing = await simulator({ errorRate: 1, timeScale: 0.001 });
    const error = await chatCompletion({
      messages,
      signal: new AbortController().signal,
      context: { queue, jobKind: "error" },
      baseUrl: failing.modelBaseUrl,
      // Two failures: a third in a row would open the circuit breaker (lib/ratelimit/breaker.ts).
      maxRetries: 1,
    }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ModelCallError);
    expect(error).toMatchObject({ status: 500, attempts: 2, retryable: true });
    const rows = await recorded("error");
    expect(rows.map((r) => r.outcome)).toEqual(["error", "error"]);
    expect(rows[0]!.error).toMatch(/^HTTP 500: /);
  });

  it("a third failure in a row opens the model's circuit breaker: the call ends OutsideServiceDown, and that attempt is recorded too", async () => {
    const failing = await simulator({ errorRate: 1, timeScale: 0.001 });
    const error = await chatCompletion({
      messages,
      signal: new AbortController().signal,
      context: { queue, jobKind: "breaker" },
      baseUrl: failing.modelBaseUrl,
      maxRetries: 2,
    }).catch((e: unknown) => e);

    expect(isOutsideServiceDown(error)).toBe(true);
    const rows = await recorded("breaker");
    expect(rows.map((r) => r.outcome)).toEqual(["error", "error", "error"]);
  });

  it("rejects with exactly the abort reason mid-call, records it as aborted, and the simulator stops waiting", async () => {
    // A minute-long call at time scale 1: only the abort can end it within the test.
    const slow = await simulator({ errorRate: 0, timeScale: 1, latencyMs: () => 60_000 });
    const controller = new AbortController();
    const reason = new DeadlineProbe("soft limit reached");
    const pending = chatCompletion({
      messages,
      signal: controller.signal,
      context: { queue, jobKind: "aborted" },
      baseUrl: slow.modelBaseUrl,
    });

    await vi.waitFor(() => expect(slow.model.inFlight()).toBe(1));
    controller.abort(reason);

    await expect(pending).rejects.toBe(reason);
    const rows = await recorded("aborted");
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ outcome: "aborted", error: "DeadlineProbe: soft limit reached" });
    await vi.waitFor(() => expect(slow.model.inFlight()).toBe(0), { timeout: 2_000 });
  });
});
