import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Job as QueueJob } from "bullmq";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";

// These tests stop runs at chosen rows and count model requests one per row: they run the rows
// one after another (items in flight are covered by for-each-item.property.integration.test.ts
// and the concurrent import tests).
vi.stubEnv("BOUNDED_ITEMS_IN_FLIGHT_CSV_IMPORT", "1");

// The processor reads the model endpoint from env().MODEL_BASE_URL, and env() is parsed once, on
// first use — which happens while modules that log are being imported. So the simulator's port
// is taken first (a server with a placeholder handler), the environment is set, and only then is
// anything from the project imported, dynamically.

let server: http.Server;
let handle: http.RequestListener = (_req, res) => res.writeHead(503).end();
let modelRequests = 0;
/**
 * Called as each model request arrives (count is 1-based); the simulator only sees the request
 * once what this returns has settled, so a test can hold an answer back.
 */
let onModelRequest: (count: number) => void | Promise<void> = () => {};

type Modules = {
  db: typeof import("@/lib/db/client");
  env: typeof import("@/lib/env");
  log: typeof import("@/lib/log");
  createImport: typeof import("@/lib/imports/create-import");
  run: typeof import("@/lib/runs/attempt");
  errors: typeof import("@/lib/core/signals");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  record: typeof import("@/lib/modelcalls/record");
  runtime: typeof import("@/lib/runs/run-job");
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
  // These tests are about the import, not its deadline: a budget no test run comes near.
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_SOFT_S", "600000");
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_HARD_S", "900000");

  m = {
    db: await import("@/lib/db/client"),
    env: await import("@/lib/env"),
    log: await import("@/lib/log"),
    createImport: await import("@/lib/imports/create-import"),
    run: await import("@/lib/runs/attempt"),
    errors: await import("@/lib/core/signals"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    record: await import("@/lib/modelcalls/record"),
    runtime: await import("@/lib/runs/run-job"),
    csv: await import("./csv-import"),
    tenants: await import("@/test/helpers/tenants"),
  };
  // If env() had been parsed before the stub, the processor would call some other model server.
  expect(m.env.env().MODEL_BASE_URL).toBe(`http://127.0.0.1:${port}/v1`);

  const { createRouter } = await import("@/workers/simulators/router");
  const { createModelSimulator } = await import("@/workers/simulators/model");
  const simulator = createRouter(
    createModelSimulator({ errorRate: 0, timeScale: m.env.env().BOUNDED_TIME_SCALE }).routes,
  );
  handle = (req, res) => {
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") return simulator(req, res);
    modelRequests += 1;
    void Promise.resolve(onModelRequest(modelRequests)).then(() => simulator(req, res));
  };
});

const tenants: string[] = [];

afterEach(async () => {
  onModelRequest = () => {};
  modelRequests = 0;
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

const HEADER = "date,amount,currency,counterparty,description";
const COUNTERPARTIES = ["REWE Markt", "Deutsche Bahn", "Netflix", "Stadtwerke", "Acme GmbH"];

/** A bad row: what is written at that data row, and the reason the end user reads. */
interface BadRow {
  line: string;
  reason: string;
}

/**
 * 30 data rows (spreadsheet rows 2–31, the header is row 1); `bad` maps a spreadsheet row to a
 * broken line. Good rows cycle through counterparties the simulated model recognises.
 */
function bankCsv(bad: Record<number, BadRow>, dataRows = 30): Uint8Array {
  const lines = [HEADER];
  for (let row = 2; row <= dataRows + 1; row++) {
    const day = String(((row - 2) % 28) + 1).padStart(2, "0");
    lines.push(
      bad[row]?.line ??
        `2026-01-${day},-${row}.50,EUR,${COUNTERPARTIES[row % COUNTERPARTIES.length]},card payment ${row}`,
    );
  }
  return new TextEncoder().encode(`${lines.join("\n")}\n`);
}

const BAD_ROWS: Record<number, BadRow> = {
  4: { line: "2026-02-30,-4.50,EUR,REWE Markt,x", reason: "date is not a real calendar date" },
  9: { line: "2026-01-08,twelve,EUR,REWE Markt,x", reason: "amount “twelve” is not a number" },
  18: {
    line: "2026-01-17,-18.50,XYZ,REWE Markt,x",
    reason: "currency “XYZ” is not one of EUR, USD, GBP, CHF, SEK, NOK, DKK, PLN, CZK, JPY, CAD, AUD",
  },
  25: { line: "2026-01-24,-25.50,EUR,REWE Markt", reason: "row has 4 fields, expected 5" },
};
const GOOD_ROWS = Array.from({ length: 30 }, (_, i) => i + 2).filter((row) => !(row in BAD_ROWS));

async function importFile(label: string, bytes: Uint8Array): Promise<string> {
  const tenant = m.tenants.uniqueTenantSlug(label);
  tenants.push(tenant);
  const result = await m.createImport.createImport({ tenant, filename: `${label}.csv`, bytes });
  if (result.type !== "created") throw new Error(`upload rejected: ${result.message}`);
  // The queue job is not what these tests run (they call runJob directly): remove it at once.
  await m.queues.queue("imports").remove(result.jobId);
  return result.jobId;
}

/** What a BullMQ worker hands the runtime; runJob reads only `data`. */
const queueJobFor = (jobId: string) => ({ id: jobId, data: { jobId } }) as unknown as QueueJob;

const runOnce = (jobId: string, signal: AbortSignal = new AbortController().signal) =>
  m.runtime.runJob({ csv_import: m.csv.csvImport }, queueJobFor(jobId), signal, m.log.logger("test"));

const jobRow = (jobId: string) =>
  m.db.db().job.findUniqueOrThrow({
    where: { id: jobId },
    select: { status: true, attempt: true, cursor: true, processed: true, failed: true, message: true, total: true },
  });

async function transactionRows(jobId: string): Promise<number[]> {
  const rows = await m.db
    .db()
    .transaction.findMany({ where: { jobId }, select: { row: true }, orderBy: { row: "asc" } });
  return rows.map((r) => r.row);
}

/** Rows written more than once for this job, counted in the database rather than trusted to a constraint. */
async function duplicatedTransactionRows(jobId: string): Promise<number[]> {
  const groups = await m.db
    .db()
    .transaction.groupBy({ by: ["jobId", "row"], where: { jobId }, _count: { _all: true } });
  return groups.filter((g) => g._count._all > 1).map((g) => g.row);
}

async function failures(jobId: string) {
  return m.db.db().jobItemFailure.findMany({
    where: { jobId },
    select: { row: true, reason: true, attempt: true },
    orderBy: { row: "asc" },
  });
}

async function modelCalls(jobId: string) {
  await m.record.flushModelCallRecords();
  return m.db.db().modelCall.findMany({
    where: { jobId },
    select: { jobId: true, jobKind: true, queue: true, model: true, outcome: true },
  });
}

describe("csv_import through the runtime, against the model simulator", () => {
  it("writes a Transaction per good row and a failure per bad row (with its spreadsheet row and reason), ending completed_with_errors", async () => {
    const jobId = await importFile("mixed", bankCsv(BAD_ROWS));

    await runOnce(jobId);

    const job = await jobRow(jobId);
    expect(job).toMatchObject({
      status: "completed_with_errors",
      total: 30,
      processed: 26,
      failed: 4,
      cursor: 30,
      attempt: 1,
    });
    expect(job.message).toBe("Imported 26 of 30 rows; 4 rows could not be imported (see the list below).");

    expect(await transactionRows(jobId)).toEqual(GOOD_ROWS);
    expect(await failures(jobId)).toEqual(
      Object.entries(BAD_ROWS).map(([row, bad]) => ({ row: Number(row), reason: bad.reason, attempt: 1 })),
    );
  });

  it("stores each good row's values and the category the model chose", async () => {
    const jobId = await importFile("values", bankCsv(BAD_ROWS));

    await runOnce(jobId);

    const tenant = await m.db.db().job.findUniqueOrThrow({ where: { id: jobId }, select: { tenantId: true } });
    const rewe = await m.db.db().transaction.findUniqueOrThrow({
      where: { jobId_row: { jobId, row: 5 } },
      include: { category: true },
    });
    expect(rewe).toMatchObject({
      tenantId: tenant.tenantId,
      amountMinor: -550n,
      currency: "EUR",
      counterparty: "REWE Markt",
      description: "card payment 5",
    });
    expect(rewe.date.toISOString()).toBe("2026-01-04T00:00:00.000Z");
    expect(rewe.category.slug).toBe("groceries");
    const train = await m.db
      .db()
      .transaction.findUniqueOrThrow({ where: { jobId_row: { jobId, row: 6 } }, include: { category: true } });
    expect(train.counterparty).toBe("Deutsche Bahn");
    expect(train.category.slug).toBe("transport");
    const unknown = await m.db
      .db()
      .transaction.findUniqueOrThrow({ where: { jobId_row: { jobId, row: 14 } }, include: { category: true } });
    expect(unknown.counterparty).toBe("Acme GmbH");
    expect(unknown.category.slug).toBe("other");
  });

  it("records every model call with the job's id, kind and queue", async () => {
    const jobId = await importFile("calls", bankCsv(BAD_ROWS));

    await runOnce(jobId);

    const calls = await modelCalls(jobId);
    expect(calls).toHaveLength(26);
    for (const call of calls) {
      expect(call).toEqual({
        jobId,
        jobKind: "csv_import",
        queue: "imports",
        model: m.env.env().MODEL_NAME,
        outcome: "ok",
      });
    }
    expect(modelRequests).toBe(26);
  });

  it("ends a file without bad rows as completed, saying every row was imported", async () => {
    const jobId = await importFile("clean", bankCsv({}, 12));

    await runOnce(jobId);

    expect(await jobRow(jobId)).toMatchObject({
      status: "completed",
      processed: 12,
      failed: 0,
      cursor: 12,
      message: "Imported all 12 rows.",
    });
    expect(await failures(jobId)).toEqual([]);
  });

  it("counts spreadsheet rows for semicolon files with Windows line endings and a byte-order mark too", async () => {
    const text =
      "\ufeffDescription;Counterparty;Currency;Amount;Date\r\n" +
      "Einkauf;REWE Markt;EUR;-1.234,56;2026-03-01\r\n" +
      "x;Acme GmbH;EUR;0,00;2026-03-02\r\n" +
      "y;Acme GmbH;EUR;12,00;2026-03-03\r\n";
    const jobId = await importFile("semicolon", new TextEncoder().encode(text));

    await runOnce(jobId);

    expect(await jobRow(jobId)).toMatchObject({ status: "completed_with_errors", processed: 2, failed: 1 });
    expect(await failures(jobId)).toEqual([{ row: 3, reason: "amount is zero", attempt: 1 }]);
    const first = await m.db.db().transaction.findUniqueOrThrow({ where: { jobId_row: { jobId, row: 2 } } });
    expect(first.amountMinor).toBe(-123456n);
    expect(await transactionRows(jobId)).toEqual([2, 4]);
  });

  it("numbers rows as a spreadsheet shows them: a quoted multi-line field is one row, empty ',,,,' rows are skipped", async () => {
    const text =
      "date,amount,currency,counterparty,description\r\n" +
      '2026-03-01,-5.00,EUR,REWE Markt,"two\r\nlines"\r\n' +
      "2026-03-02,0.00,EUR,Acme GmbH,zero\r\n" +
      ",,,,\r\n" +
      "2026-03-03,7.00,EUR,Acme GmbH,ok\r\n";
    const jobId = await importFile("multiline", new TextEncoder().encode(text));

    await runOnce(jobId);

    expect(await jobRow(jobId)).toMatchObject({ status: "completed_with_errors", processed: 2, failed: 1, total: 3 });
    expect(await failures(jobId)).toEqual([{ row: 3, reason: "amount is zero", attempt: 1 }]);
    expect(await transactionRows(jobId)).toEqual([2, 4]);
  });

  it("does not run a job that is already terminal: no model call, no row written", async () => {
    const jobId = await importFile("terminal", bankCsv({}, 5));
    await m.db.db().job.update({ where: { id: jobId }, data: { status: "cancelled" } });

    // The queue job fails with the reason (a queue job never completes for a row that did not).
    await expect(runOnce(jobId)).rejects.toThrow(/already cancelled in Bounded/);

    expect(await jobRow(jobId)).toMatchObject({ status: "cancelled", attempt: 0, processed: 0 });
    expect(modelRequests).toBe(0);
    expect(await transactionRows(jobId)).toEqual([]);
  });
});

describe("csv_import retries resume at the cursor", () => {
  it("a retry after an aborted run resumes at the job's cursor and writes no Transaction twice", async () => {
    const jobId = await importFile("resume", bankCsv(BAD_ROWS));
    // Abort the first run as the 11th model call arrives: rows 2–13 are done (10 good, 2 bad:
    // rows 4 and 9) and the model call for row 14 is in flight.
    const first = new AbortController();
    const reason = new m.errors.WorkerShutdown("worker shutting down");
    onModelRequest = (n) => {
      if (n === 11) first.abort(reason);
    };

    await expect(runOnce(jobId, first.signal)).rejects.toBe(reason);

    // A shutdown hands the run back: the row is queued again, its cursor says where to resume.
    const afterFirst = await jobRow(jobId);
    expect(afterFirst).toMatchObject({ status: "queued", attempt: 1, cursor: 12, processed: 10, failed: 2 });
    expect(await transactionRows(jobId)).toEqual(GOOD_ROWS.filter((row) => row <= 13));

    // An operator retries: the row goes back to the queue with its cursor.
    onModelRequest = () => {};
    await m.db.db().job.update({ where: { id: jobId }, data: { status: "queued" } });

    await runOnce(jobId);

    const job = await jobRow(jobId);
    expect(job).toMatchObject({ status: "completed_with_errors", attempt: 2, cursor: 30, processed: 26, failed: 4 });
    expect(job.message).toBe("Imported 26 of 30 rows; 4 rows could not be imported (see the list below).");
    expect(await transactionRows(jobId)).toEqual(GOOD_ROWS);
    expect(await duplicatedTransactionRows(jobId)).toEqual([]);
    expect((await failures(jobId)).map((f) => [f.row, f.attempt])).toEqual([
      [4, 1],
      [9, 1],
      [18, 2],
      [25, 2],
    ]);

    // Rows before the cursor were not sent to the model again: 10 + 1 aborted in the first run,
    // 16 in the second (row 14's call is repeated, since it never committed).
    expect(modelRequests).toBe(27);
    const calls = await modelCalls(jobId);
    expect(calls.filter((c) => c.outcome === "ok")).toHaveLength(26);
    expect(calls.filter((c) => c.outcome === "aborted")).toHaveLength(1);
    expect(calls.every((c) => c.jobId === jobId && c.jobKind === "csv_import" && c.queue === "imports")).toBe(true);
  });

  it("a run overtaken by a newer attempt stops at its next commit without writing it, and leaves the job to the newer attempt", async () => {
    const jobId = await importFile("fenced", bankCsv(BAD_ROWS));
    // As the 6th model call (row 8) arrives, another worker starts attempt 2 of the same job; the
    // answer is held until then, so the old run's commit of row 8 meets the fence.
    let newer: Awaited<ReturnType<typeof m.run.startAttempt>> = null;
    onModelRequest = async (n) => {
      if (n === 6) newer = await m.run.startAttempt(jobId);
    };

    await expect(runOnce(jobId)).resolves.toBeUndefined();

    expect(newer).toMatchObject({ attempt: 2, cursor: 6 });
    // The old run neither finished the job nor marked it failed: attempt 2 owns it, still running.
    expect(await jobRow(jobId)).toMatchObject({
      status: "running",
      attempt: 2,
      cursor: 6,
      processed: 5,
      failed: 1,
      message: null,
    });
    expect(await transactionRows(jobId)).toEqual([2, 3, 5, 6, 7]);
    expect(modelRequests).toBe(6);
  });
});
