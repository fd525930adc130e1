import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startImportHarness } from "@/test/helpers/import-harness";
import { waitFor } from "@/test/helpers/wait";

// One row per model call, so that a refusal names exactly one row.
vi.stubEnv("BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT", "1");
const h = await startImportHarness();
const { breakerKey } = await import("@/lib/ratelimit/breaker");
const { OUTSIDE_SERVICES } = await import("@/lib/ratelimit/breaker-services");
const { scaled } = await import("@/lib/time");
const { redis } = await import("@/lib/redis/client");
const { db } = h.m.db;

const port = (h.server.address() as AddressInfo).port;
const simulator = h.server.listeners("request")[0] as (req: IncomingMessage, res: ServerResponse) => void;
let served = 0;
/**
 * When set, decides each model call from its body: a status refuses it, null answers it with a
 * category (as the simulator would). Unset: the simulator answers.
 */
let refuse: ((body: string) => number | null) | undefined;
/** When set, the call that brings `served` to `at` starts the outage (that call is cut, as the rest in flight). */
let outageAt: { at: number; start(): void } | undefined;
h.server.removeAllListeners("request");
h.server.on("request", (req, res) => {
  served++;
  if (outageAt && served >= outageAt.at) {
    outageAt.start();
    outageAt = undefined;
    return;
  }
  if (!refuse) return simulator(req, res);
  const decide = refuse;
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const status = decide(Buffer.concat(chunks).toString("utf8"));
    res.writeHead(status ?? 200, { "content-type": "application/json" });
    res.end(
      JSON.stringify(
        status === null
          ? {
              id: "c",
              object: "chat.completion",
              created: 0,
              model: "m",
              choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "groceries" } }],
            }
          : { error: { message: "this transaction cannot be categorised" } },
      ),
    );
  });
});

/** Takes the model service down: the port is closed (connection refused) and open connections are cut. */
async function modelDown(): Promise<void> {
  const closed = new Promise((r) => h.server.close(r));
  h.server.closeAllConnections();
  await closed;
}
/**
 * Resolves once the breaker has seen the outage: on a loaded machine a few production minutes are
 * a few real milliseconds, which could pass without one call noticing.
 */
async function breakerOpened(): Promise<void> {
  await waitFor(async () => (await redis().hget(breakerKey("model"), "state")) !== null, {
    what: "the model's breaker to see the outage",
    timeoutMs: 20_000,
    intervalMs: 5,
  });
}
/** Brings it back on the same port. */
async function modelUp(): Promise<void> {
  await new Promise<void>((r) => h.server.listen(port, "127.0.0.1", r));
}

beforeAll(async () => {
  await redis().del(...OUTSIDE_SERVICES.map(breakerKey));
});
afterAll(async () => {
  await redis().del(...OUTSIDE_SERVICES.map(breakerKey));
  if (!h.server.listening) await modelUp();
  await h.close();
});

/** Runs jobs as workers would until every one is terminal (test/helpers/import-harness.ts); deferrals per job. */
async function runToEnd(jobIds: string[], deadlineMs: number) {
  const counts = await Promise.all(jobIds.map((id) => h.runToEnd(id, deadlineMs)));
  return new Map(jobIds.map((id, i) => [id, counts[i]!]));
}

describe("csv_import while the model service is down (real database, Redis, HTTP)", () => {
  it("10 imports through a two-minute outage: 10/10 complete, every row imported, none failed for it", async () => {
    const ROWS = 15;
    const jobs: string[] = [];
    for (let i = 0; i < 10; i++) jobs.push(await h.importOf(ROWS, `outage-${i}`));
    // The outage starts once the imports are under way and lasts two production minutes.
    const outageMs = scaled(120_000);
    let outage: Promise<void> | undefined;
    served = 0;
    outageAt = {
      at: 30,
      start: () =>
        (outage = modelDown()
          .then(() => delay(outageMs))
          .then(breakerOpened)
          .then(modelUp)),
    };
    const deferrals = await runToEnd(jobs, 60_000);
    await outage;
    expect(outage).toBeDefined();

    const rows = await db().job.findMany({
      where: { id: { in: jobs } },
      select: { id: true, status: true, processed: true, failed: true, reschedules: true },
    });
    expect(rows.map((r) => r.status)).toEqual(Array(10).fill("completed"));
    expect(rows.every((r) => r.processed === ROWS && r.failed === 0)).toBe(true);
    expect(await db().transaction.count({ where: { jobId: { in: jobs } } })).toBe(10 * ROWS);
    // The outage was met and waited out (slots given back), not failed through.
    expect([...deferrals.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    expect(rows.some((r) => r.reschedules > 0)).toBe(true);
    const events = await db().jobEvent.findMany({
      where: { jobId: { in: jobs }, type: "delayed" },
      select: { message: true },
    });
    expect(events.some((e) => /model service, down since/.test(e.message ?? ""))).toBe(true);
  }, 120_000);

  it("a 4xx about one row fails only that row, and never opens the breaker", async () => {
    const POISON = [3, 5, 7, 9, 11];
    const id = await h.importOf(12, "refused-rows", (i) =>
      POISON.includes(i) ? `2026-03-01,-${i}.10,EUR,REFUSE-ME,row ${i}` : null,
    );
    // The prompt shows the counterparty case-folded.
    refuse = (body) => (/refuse-me/i.test(body) ? 400 : null);
    const deferrals = await runToEnd([id], 20_000);
    expect(deferrals.get(id)).toBe(0);
    const row = await db().job.findUniqueOrThrow({
      where: { id },
      select: { status: true, processed: true, failed: true },
    });
    expect(row).toEqual({ status: "completed_with_errors", processed: 7, failed: 5 });
    expect(await redis().hget(breakerKey("model"), "state")).toBeNull();
  });
});
