import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Job as QueueJob } from "bullmq";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";

// Imports whose rows repeat questions, run through the runtime against the model simulator: how
// many rows reach the model, where every committed row's category came from, and what the job
// page reads. The model endpoint is set before env() is first parsed (see csv-import.integration.test.ts).

let server: http.Server;
let handle: http.RequestListener = (_req, res) => res.writeHead(503).end();

type Modules = {
  db: typeof import("@/lib/db/client");
  env: typeof import("@/lib/env");
  log: typeof import("@/lib/log");
  createImport: typeof import("@/lib/imports/create-import");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  record: typeof import("@/lib/modelcalls/record");
  runtime: typeof import("@/lib/runs/run-job");
  stats: typeof import("@/lib/answers/stats");
  csv: typeof import("./csv-import");
  tenants: typeof import("@/test/helpers/tenants");
};
let m: Modules;

beforeAll(async () => {
  server = http.createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  vi.stubEnv("MODEL_BASE_URL", `http://127.0.0.1:${port}/v1`);
  vi.stubEnv("BOUNDED_SIM_MODEL_ERROR_RATE", "0");
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_SOFT_S", "600000");
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_HARD_S", "900000");
  // Every row goes the direct way: these tests count the rows that reach the chat endpoint.
  vi.stubEnv("BOUNDED_BATCH_LANE_KINDS", "none");

  m = {
    db: await import("@/lib/db/client"),
    env: await import("@/lib/env"),
    log: await import("@/lib/log"),
    createImport: await import("@/lib/imports/create-import"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    record: await import("@/lib/modelcalls/record"),
    runtime: await import("@/lib/runs/run-job"),
    stats: await import("@/lib/answers/stats"),
    csv: await import("./csv-import"),
    tenants: await import("@/test/helpers/tenants"),
  };
  expect(m.env.env().MODEL_BASE_URL).toBe(`http://127.0.0.1:${port}/v1`);

  const { createRouter } = await import("@/workers/simulators/router");
  const { createModelSimulator } = await import("@/workers/simulators/model");
  const simulator = createRouter(
    createModelSimulator({ errorRate: 0, timeScale: m.env.env().BOUNDED_TIME_SCALE, latencyMs: () => 2_000 }).routes,
  );
  handle = (req, res) => void simulator(req, res);
});

const tenants: string[] = [];

afterEach(async () => {
  for (const slug of tenants.splice(0)) await m.tenants.deleteTenant(slug);
});

afterAll(async () => {
  await m?.record.flushModelCallRecords();
  await m?.queues.closeQueues();
  await m?.redis.closeRedis();
  await m?.db.closeDb();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  vi.unstubAllEnvs();
});

/** Counterparties the simulated model recognises; each row's question is its counterparty's (one description for all). */
const COUNTERPARTIES = ["REWE Markt", "Deutsche Bahn", "Netflix", "Acme GmbH"];

/** `rows` card payments cycling through `counterparties`: dates and amounts differ, the questions repeat. */
function csv(rows: number, counterparties = COUNTERPARTIES): Uint8Array {
  const lines = ["date,amount,currency,counterparty,description"];
  for (let i = 0; i < rows; i++) {
    const day = String((i % 28) + 1).padStart(2, "0");
    lines.push(`2026-01-${day},-${i + 1}.50,EUR,${counterparties[i % counterparties.length]},card payment`);
  }
  return new TextEncoder().encode(`${lines.join("\n")}\n`);
}

function newTenant(label: string): string {
  const slug = m.tenants.uniqueTenantSlug(label);
  tenants.push(slug);
  return slug;
}

/** Uploads and runs one import to its end; its job id. */
async function importAndRun(tenant: string, bytes: Uint8Array): Promise<string> {
  const result = await m.createImport.createImport({ tenant, filename: "bank.csv", bytes });
  if (result.type !== "created") throw new Error(`upload rejected: ${result.message}`);
  await m.queues.queue("imports").remove(result.jobId);
  const queueJob = { id: result.jobId, data: { jobId: result.jobId } } as unknown as QueueJob;
  await m.runtime.runJob({ csv_import: m.csv.csvImport }, queueJob, new AbortController().signal, m.log.logger("test"));
  return result.jobId;
}

/** Rows the job asked the model about: the rows of its recorded calls (each call records its batch's size). */
async function rowsAsked(jobId: string): Promise<number> {
  await m.record.flushModelCallRecords();
  const calls = await m.db.db().modelCall.aggregate({ where: { jobId, outcome: "ok" }, _sum: { batchSize: true } });
  return calls._sum.batchSize ?? 0;
}

/** Each committed row's category and where it came from, and whether any row was written twice. */
async function committed(jobId: string) {
  const db = m.db.db();
  const [transactions, uses, job] = await Promise.all([
    db.transaction.findMany({ where: { jobId }, select: { row: true, category: { select: { slug: true } } } }),
    db.categoryAnswerUse.findMany({ where: { jobId }, select: { row: true, source: true } }),
    db.job.findUniqueOrThrow({ where: { id: jobId }, select: { status: true, processed: true, failed: true } }),
  ]);
  const bySource = { model: 0, job: 0, cache: 0 };
  for (const u of uses) bySource[u.source] += 1;
  const rows = transactions.map((t) => t.row);
  return {
    job,
    rows: transactions.length,
    distinctRows: new Set(rows).size,
    usesMatchRows:
      uses
        .map((u) => u.row)
        .sort((a, b) => a - b)
        .join() === rows.sort((a, b) => a - b).join(),
    bySource,
    slugOf: (row: number) => transactions.find((t) => t.row === row)?.category.slug,
  };
}

describe("csv_import asks the model once per question", () => {
  it("a file whose rows repeat 4 questions asks 4 rows, commits all 20 once, and the job's counts say so", async () => {
    const tenant = newTenant("repeats");
    const jobId = await importAndRun(tenant, csv(20));

    expect(await rowsAsked(jobId)).toBe(4);
    const c = await committed(jobId);
    expect(c.job).toEqual({ status: "completed", processed: 20, failed: 0 });
    expect(c).toMatchObject({ rows: 20, distinctRows: 20, usesMatchRows: true });
    expect(c.bySource).toEqual({ model: 4, job: 16, cache: 0 });
    // Spreadsheet row 2 is the first data row (REWE Markt), row 3 the second (Deutsche Bahn)…
    expect([c.slugOf(2), c.slugOf(3), c.slugOf(6), c.slugOf(21)]).toEqual([
      "groceries",
      "transport",
      "groceries",
      "other",
    ]);

    const reuse = await m.stats.getJobAnswerReuse(jobId);
    expect(reuse).toMatchObject({ model: 4, job: 16, cache: 0, cacheHitRate: 0, reuseRate: 0.8 });
    expect(reuse.saved.calls).toBeGreaterThan(0);
    expect(reuse.saved.promptTokens).toBeGreaterThan(0);
    expect(reuse.saved.costUsd).toBeGreaterThan(0);
  });

  it("a second file of the tenant is answered from its stored answers; another tenant's same file is not", async () => {
    const tenant = newTenant("second");
    expect(await rowsAsked(await importAndRun(tenant, csv(8)))).toBe(4);

    const second = await importAndRun(tenant, csv(10, [...COUNTERPARTIES, "Stadtwerke"]));
    // Only the new question (Stadtwerke) reaches the model.
    expect(await rowsAsked(second)).toBe(1);
    const c = await committed(second);
    expect(c.job).toEqual({ status: "completed", processed: 10, failed: 0 });
    expect(c).toMatchObject({ rows: 10, distinctRows: 10, usesMatchRows: true });
    expect(c.bySource).toEqual({ model: 1, job: 5, cache: 4 });
    expect(c.slugOf(6)).toBe("utilities");
    expect(await m.stats.getJobAnswerReuse(second)).toMatchObject({ cache: 4, cacheHitRate: 0.4 });

    const other = await importAndRun(newTenant("other"), csv(8));
    expect(await rowsAsked(other)).toBe(4);
    expect((await committed(other)).bySource).toEqual({ model: 4, job: 4, cache: 0 });
  });

  it("with reuse off every row asks the model, and nothing is stored for the next file", async () => {
    // The parsed environment is read once per process: this test switches the one field it needs.
    const parsed = m.env.env();
    parsed.BOUNDED_CATEGORY_ANSWER_REUSE = false;
    try {
      const tenant = newTenant("reuse-off");
      const first = await importAndRun(tenant, csv(8));
      expect(await rowsAsked(first)).toBe(8);
      expect((await committed(first)).bySource).toEqual({ model: 8, job: 0, cache: 0 });
      const second = await importAndRun(tenant, csv(8));
      expect(await rowsAsked(second)).toBe(8);
      expect(await m.db.db().categoryAnswer.count({ where: { tenant: { slug: tenant } } })).toBe(0);
    } finally {
      parsed.BOUNDED_CATEGORY_ANSWER_REUSE = true;
    }
  });
});
