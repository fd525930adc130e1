import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Job as QueueJob } from "bullmq";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";

// As in csv-import.integration.test.ts: the simulators' port is taken first, the environment is
// stubbed, and only then is anything from the project imported (env() is parsed once).

let server: http.Server;
let handle: http.RequestListener = (_req, res) => res.writeHead(503).end();
const requests = { ocr: 0, model: 0 };
/** Called as each OCR request arrives (1-based); may answer it itself by returning true. */
let onOcrRequest: (count: number, res: http.ServerResponse) => boolean | Promise<boolean> = () => false;

type Modules = {
  db: typeof import("@/lib/db/client");
  env: typeof import("@/lib/env");
  log: typeof import("@/lib/log");
  batch: typeof import("@/lib/documents/create-batch");
  samples: typeof import("@/lib/documents/sample-documents");
  settings: typeof import("@/lib/documents/settings");
  errors: typeof import("@/lib/core/signals");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  record: typeof import("@/lib/modelcalls/record");
  runtime: typeof import("@/lib/runs/run-job");
  ocr: typeof import("./bulk-ocr");
  tenants: typeof import("@/test/helpers/tenants");
};
let m: Modules;

beforeAll(async () => {
  server = http.createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  vi.stubEnv("MODEL_BASE_URL", `http://127.0.0.1:${port}/v1`);
  // OCR goes to OCR_BASE_URL, else to the simulators' port: both point at this server.
  vi.stubEnv("OCR_BASE_URL", `http://127.0.0.1:${port}`);
  vi.stubEnv("BOUNDED_SIM_PORT", String(port));
  vi.stubEnv("BOUNDED_SIM_MODEL_ERROR_RATE", "0");
  vi.stubEnv("BOUNDED_BUDGET_DOCUMENTS_SOFT_S", "600000");
  vi.stubEnv("BOUNDED_BUDGET_DOCUMENTS_HARD_S", "900000");

  m = {
    db: await import("@/lib/db/client"),
    env: await import("@/lib/env"),
    log: await import("@/lib/log"),
    batch: await import("@/lib/documents/create-batch"),
    samples: await import("@/lib/documents/sample-documents"),
    settings: await import("@/lib/documents/settings"),
    errors: await import("@/lib/core/signals"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    record: await import("@/lib/modelcalls/record"),
    runtime: await import("@/lib/runs/run-job"),
    ocr: await import("./bulk-ocr"),
    tenants: await import("@/test/helpers/tenants"),
  };
  expect(m.settings.ocrBaseUrl()).toBe(`http://127.0.0.1:${port}`);

  const { createRouter } = await import("@/workers/simulators/router");
  const { createModelSimulator } = await import("@/workers/simulators/model");
  const { createOcrSimulator } = await import("@/workers/simulators/ocr");
  const timeScale = m.env.env().BOUNDED_TIME_SCALE;
  const simulator = createRouter([
    ...createModelSimulator({ errorRate: 0, timeScale }).routes,
    ...createOcrSimulator({ errorRate: 0, timeScale }).routes,
  ]);
  handle = (req, res) => {
    if (req.url === "/v1/chat/completions") requests.model += 1;
    if (req.url !== "/ocr") return simulator(req, res);
    requests.ocr += 1;
    void Promise.resolve(onOcrRequest(requests.ocr, res)).then((answered) => {
      if (answered) req.resume();
      else simulator(req, res);
    });
  };
});

const tenants: string[] = [];

afterEach(async () => {
  onOcrRequest = () => false;
  requests.ocr = 0;
  requests.model = 0;
  await m.record.flushModelCallRecords();
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

async function upload(label: string, files: { filename: string; bytes: Uint8Array }[]): Promise<string> {
  const tenant = m.tenants.uniqueTenantSlug(label);
  tenants.push(tenant);
  const result = await m.batch.createDocumentBatch({ tenant, files });
  if (result.type !== "created") throw new Error(`batch refused: ${result.message}`);
  // These tests call runJob themselves: the queue job is removed at once.
  await m.queues.queue("documents").remove(result.jobId);
  return result.jobId;
}

const queueJobFor = (jobId: string) => ({ id: jobId, data: { jobId } }) as unknown as QueueJob;
const runOnce = (jobId: string, signal: AbortSignal = new AbortController().signal) =>
  m.runtime.runJob({ bulk_ocr: m.ocr.bulkOcr }, queueJobFor(jobId), signal, m.log.logger("test"));

const jobRow = (jobId: string) =>
  m.db.db().job.findUniqueOrThrow({
    where: { id: jobId },
    select: { status: true, total: true, processed: true, failed: true, cursor: true, message: true, queue: true },
  });

async function calls(jobId: string) {
  await m.record.flushModelCallRecords();
  return m.db.db().modelCall.findMany({
    where: { jobId },
    select: { type: true, model: true, outcome: true, jobKind: true, queue: true },
    orderBy: { id: "asc" },
  });
}

function mixedBatch() {
  const s = m.samples;
  return [
    { filename: "invoice.pdf", bytes: s.samplePdf(["Invoice 2026-17 from Acme GmbH", "Total due: 1,234.56 EUR"]) },
    { filename: "receipt.png", bytes: s.samplePng() },
    { filename: "scan-3.pdf", bytes: s.truncatedPdf() },
    { filename: "lease.txt", bytes: s.sampleText() },
    { filename: "fax.tif", bytes: s.sampleTiff(2) },
  ];
}

describe("bulk_ocr through the runtime, against the OCR and model simulators", () => {
  it("reads every good document and records the damaged one as file 3's failure, ending completed_with_errors", async () => {
    const jobId = await upload("mixed", mixedBatch());

    await runOnce(jobId);

    expect(await jobRow(jobId)).toMatchObject({
      status: "completed_with_errors",
      queue: "documents",
      total: 5,
      processed: 4,
      failed: 1,
      cursor: 5,
      message: "Read 4 of 5 documents; 1 document could not be read (see the list below).",
    });
    expect(await m.db.db().jobItemFailure.findMany({ where: { jobId }, select: { row: true, reason: true } })).toEqual([
      { row: 3, reason: "scan-3.pdf: could not be read: the PDF is damaged (it ends before its end-of-file marker)" },
    ]);

    const files = await m.db.db().jobFile.findMany({
      where: { jobId },
      select: { index: true, contentType: true, text: true, summary: true },
      orderBy: { index: "asc" },
    });
    expect(files.map((f) => [f.index, f.contentType])).toEqual([
      [1, "application/pdf"],
      [2, "image/png"],
      [3, "application/pdf"],
      [4, "text/plain"],
      [5, "image/tiff"],
    ]);
    expect(files[0]!.text).toBe("Invoice 2026-17 from Acme GmbH\nTotal due: 1,234.56 EUR");
    expect(files[3]!.text).toContain("Monthly rent: 950.00 EUR");
    expect(files[4]!.text).toContain("Page 2 of 2");
    expect(files[2]).toMatchObject({ text: null, summary: null });
    for (const f of [files[0], files[1], files[3], files[4]]) expect(f!.summary).toMatch(/\S/);
  });

  it("records each OCR attempt as an ocr call and each model pass as a model call, with the job's id, kind and queue", async () => {
    const jobId = await upload("calls", mixedBatch());

    await runOnce(jobId);

    const rows = await calls(jobId);
    const ocr = rows.filter((c) => c.type === "ocr");
    const model = rows.filter((c) => c.type === "model");
    // The damaged PDF is refused (422, not retried): one error row, and no model pass for it.
    expect(ocr.map((c) => c.outcome).sort()).toEqual(["error", "ok", "ok", "ok", "ok"]);
    expect(model).toHaveLength(4);
    expect(rows).toHaveLength(9);
    for (const c of ocr) expect(c).toMatchObject({ model: "ocr", jobKind: "bulk_ocr", queue: "documents" });
    for (const c of model)
      expect(c).toMatchObject({
        model: m.env.env().MODEL_NAME,
        jobKind: "bulk_ocr",
        queue: "documents",
        outcome: "ok",
      });
    expect(requests).toEqual({ ocr: 5, model: 4 });
  });

  it("retries an OCR call that failed with a 500, and the document is read", async () => {
    const jobId = await upload("retry", [{ filename: "only.txt", bytes: m.samples.sampleText("one page") }]);
    onOcrRequest = (n, res) => {
      if (n > 1) return false;
      res
        .writeHead(500, { "content-type": "application/json" })
        .end(JSON.stringify({ error: { message: "OCR worker restarted", type: "server_error" } }));
      return true;
    };

    await runOnce(jobId);

    expect(await jobRow(jobId)).toMatchObject({
      status: "completed",
      processed: 1,
      failed: 0,
      message: "Read the 1 document.",
    });
    expect((await calls(jobId)).filter((c) => c.type === "ocr").map((c) => c.outcome)).toEqual(["error", "ok"]);
  });

  it("a file that became unacceptable after the upload (here: emptied) is that file's failure, not the batch's", async () => {
    const jobId = await upload("emptied", [
      { filename: "a.txt", bytes: m.samples.sampleText("first") },
      { filename: "b.txt", bytes: m.samples.sampleText("second") },
    ]);
    await m.db.db().jobFile.update({ where: { jobId_index: { jobId, index: 2 } }, data: { content: Buffer.alloc(0) } });

    await runOnce(jobId);

    expect(await jobRow(jobId)).toMatchObject({ status: "completed_with_errors", processed: 1, failed: 1 });
    expect(await m.db.db().jobItemFailure.findMany({ where: { jobId }, select: { row: true, reason: true } })).toEqual([
      { row: 2, reason: "b.txt is empty" },
    ]);
    expect(requests.ocr).toBe(1);
  });

  it("an OCR call in flight when the worker stops is aborted with the signal's reason, recorded as aborted, and the run resumes at its cursor", async () => {
    const jobId = await upload("abort", mixedBatch());
    const stop = new AbortController();
    const reason = new m.errors.WorkerShutdown("worker shutting down");
    onOcrRequest = (n) => {
      if (n === 2) stop.abort(reason);
      return false;
    };

    await expect(runOnce(jobId, stop.signal)).rejects.toBe(reason);

    expect(await jobRow(jobId)).toMatchObject({ status: "queued", cursor: 1, processed: 1, failed: 0 });
    expect((await calls(jobId)).filter((c) => c.type === "ocr").map((c) => c.outcome)).toEqual(["ok", "aborted"]);

    onOcrRequest = () => false;
    await m.db.db().job.update({ where: { id: jobId }, data: { status: "queued" } });
    await runOnce(jobId);

    expect(await jobRow(jobId)).toMatchObject({ status: "completed_with_errors", processed: 4, failed: 1, cursor: 5 });
  });
});

describe("createDocumentBatch refuses a bad batch before anything is created", () => {
  it.each([
    ["an empty file", () => new Uint8Array(0), 422, "empty_file", "File 2 (“bad”) is empty. Nothing was uploaded."],
    [
      "a Word document",
      () => Uint8Array.from([0x50, 0x4b, 0x03, 0x04, 0, 0]),
      415,
      "unsupported_type",
      "File 2 (“bad”) is a Word or Excel document or a ZIP archive; upload PDF, PNG, JPEG, TIFF or plain text. Nothing was uploaded.",
    ],
  ])("%s → %i, no tenant, no job, no file", async (_name, bytes, status, code, message) => {
    const tenant = m.tenants.uniqueTenantSlug("refused");
    tenants.push(tenant);
    const result = await m.batch.createDocumentBatch({
      tenant,
      files: [
        { filename: "ok.pdf", bytes: m.samples.samplePdf() },
        { filename: "bad", bytes: bytes() },
      ],
    });
    expect(result).toEqual({ type: "rejected", status, code, message });
    expect(await m.db.db().tenant.findUnique({ where: { slug: tenant } })).toBeNull();
  });
});
