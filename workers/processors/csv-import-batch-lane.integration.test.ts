import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Job as QueueJob } from "bullmq";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";

// The batch lane of csv_import against the simulated batch service over real HTTP, with the real
// PostgreSQL and Redis. The job runs at BOUNDED_TIME_SCALE 0.001 (its 1.5 h budget is 5.4 s) and the
// batch service's clock at the same pace (a production second each real millisecond), which a
// test may also move ahead at once (`clock.ahead`).
// Runs are called directly (no BullMQ worker): a run that gives its slot back writes the row
// `delayed` and throws `BatchPending` to its caller, who runs it again as the wake-up would.

let server: http.Server;
let handle: http.RequestListener = (_req, res) => res.writeHead(503).end();
let chatRequests = 0;
/** A provider without a batch service: `/v1/files` answers 404. */
let noBatchService = false;
/** Direct calls are answered once this resolves (a test holds them back). */
let chatGate: Promise<void> = Promise.resolve();
/** Batches are created at once, but the answer to their create waits for this. */
let createGate: Promise<void> = Promise.resolve();
let creates = 0;
/** Looks at a batch (`GET /v1/batches/<id>`) are answered once this resolves. */
let lookGate: Promise<void> = Promise.resolve();
let looks = 0;
const clock = { base: Date.now(), ahead: 0 };
const prefix = `bounded-test-batch-${randomUUID().slice(0, 8)}`;
const simNow = () => clock.base + (Date.now() - clock.base) * 1000 + clock.ahead;

type Modules = {
  db: typeof import("@/lib/db/client");
  log: typeof import("@/lib/log");
  createImport: typeof import("@/lib/imports/create-import");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  record: typeof import("@/lib/modelcalls/record");
  runtime: typeof import("@/lib/runs/run-job");
  csv: typeof import("./csv-import");
  tenants: typeof import("@/test/helpers/tenants");
  bullmq: typeof import("bullmq");
  processor: typeof import("@/workers/queue-processor");
  catalog: typeof import("@/workers/catalog");
  reschedule: typeof import("@/lib/runs/reschedule");
  metrics: typeof import("@/lib/metrics/metrics");
  cancel: typeof import("@/lib/actions/cancel");
  customer: typeof import("@/lib/progress/customer-progress");
  projection: typeof import("@/lib/projection/projection");
  lane: typeof import("@/lib/runs/batch-lane");
  faults: import("@/workers/simulators/faults").SimulatorFaults;
};
let m: Modules;

beforeAll(async () => {
  server = http.createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  vi.stubEnv("MODEL_BASE_URL", `http://127.0.0.1:${port}/v1`);
  vi.stubEnv("BOUNDED_SIM_MODEL_ERROR_RATE", "0");
  vi.stubEnv("BOUNDED_TIME_SCALE", "0.001");
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_SOFT_S", "5400");
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_HARD_S", "7200");
  vi.stubEnv("BOUNDED_AUTO_SPLIT", "0");
  vi.stubEnv("BOUNDED_BATCH_LANE_KINDS", "csv_import");
  // A queue of the file's own: only its worker takes the imports it leaves in the queue.
  vi.stubEnv("BOUNDED_REDIS_PREFIX", prefix);

  const { createRouter } = await import("@/workers/simulators/router");
  const { createModelSimulator } = await import("@/workers/simulators/model");
  const { createModelBatches } = await import("@/workers/simulators/model-batches");
  const { createSimulatorFaults } = await import("@/workers/simulators/faults");
  const faults = createSimulatorFaults([]);
  const model = { errorRate: 0, timeScale: 1, latencyMs: () => 1 };
  const router = createRouter([
    ...createModelSimulator(model).routes,
    ...createModelBatches({ ...model, now: simNow, turnaroundMs: () => 600_000 }, faults).routes,
  ]);
  handle = (req, res) => {
    if (noBatchService && req.url?.startsWith("/v1/files")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(
        JSON.stringify({ error: { message: `Unknown request URL: POST ${req.url}`, type: "invalid_request_error" } }),
      );
      return;
    }
    if (req.method === "POST" && req.url === "/v1/batches") {
      creates += 1;
      const end = res.end.bind(res) as (...a: unknown[]) => void;
      res.end = ((...a: unknown[]) => {
        void createGate.then(() => end(...a));
        return res;
      }) as typeof res.end;
      return router(req, res);
    }
    if (req.method === "GET" && req.url?.startsWith("/v1/batches/")) {
      looks += 1;
      void lookGate.then(() => router(req, res));
      return;
    }
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") return router(req, res);
    chatRequests += 1;
    void chatGate.then(() => router(req, res));
  };
  m = {
    db: await import("@/lib/db/client"),
    log: await import("@/lib/log"),
    createImport: await import("@/lib/imports/create-import"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    record: await import("@/lib/modelcalls/record"),
    runtime: await import("@/lib/runs/run-job"),
    csv: await import("./csv-import"),
    tenants: await import("@/test/helpers/tenants"),
    bullmq: await import("bullmq"),
    processor: await import("@/workers/queue-processor"),
    catalog: await import("@/workers/catalog"),
    reschedule: await import("@/lib/runs/reschedule"),
    metrics: await import("@/lib/metrics/metrics"),
    cancel: await import("@/lib/actions/cancel"),
    customer: await import("@/lib/progress/customer-progress"),
    projection: await import("@/lib/projection/projection"),
    lane: await import("@/lib/runs/batch-lane"),
    faults,
  };
});

const tenants: string[] = [];
afterEach(async () => {
  chatRequests = 0;
  noBatchService = false;
  m.faults.setBatches({ expire: false, failing: false, turnaroundMs: null });
  for (const slug of tenants.splice(0)) await m.tenants.deleteTenant(slug);
});

afterAll(async () => {
  await m?.record.flushModelCallRecords();
  const keys = await m?.redis.redis().keys(`${prefix}:*`);
  if (keys?.length) await m.redis.redis().del(...keys);
  await m?.queues.closeQueues();
  await m?.redis.closeRedis();
  await m?.db.closeDb();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  vi.unstubAllEnvs();
});

const COUNTERPARTIES = ["REWE Markt", "Deutsche Bahn", "Netflix", "Stadtwerke", "Acme GmbH", "Lidl"];
const ROWS = 24;

/** 24 data rows, each its own question (distinct descriptions), spreadsheet rows 2–25. */
function bankCsv(label: string): Uint8Array {
  const lines = ["date,amount,currency,counterparty,description"];
  for (let row = 2; row <= ROWS + 1; row++)
    lines.push(
      `2026-01-${String(row).padStart(2, "0")},-${row}.50,EUR,${COUNTERPARTIES[row % 6]},${label} payment ${row}`,
    );
  return new TextEncoder().encode(`${lines.join("\n")}\n`);
}

/**
 * An import of `bankCsv`, with a budget an operator set (a run's start keeps it): by default the
 * lane's 1 h turnaround, a cancel's settling and the rows' projected direct time with its margin,
 * plus 20 min — whatever this database measured of earlier imports, the batch lane fits, and its
 * last moment is 1 h 20 min (4.8 s) after the start.
 */
async function importFile(label: string, budgetSoftMs?: number, keepQueued = false): Promise<string> {
  const tenant = m.tenants.uniqueTenantSlug(label);
  tenants.push(tenant);
  const result = await m.createImport.createImport({ tenant, filename: `${label}.csv`, bytes: bankCsv(label) });
  if (result.type !== "created") throw new Error(`upload rejected: ${result.message}`);
  if (!keepQueued) await m.queues.queue("imports").remove(result.jobId);
  const direct = (await m.projection.projectItems("csv_import", ROWS, new Date(), { jobId: result.jobId }))!.ms;
  const soft =
    budgetSoftMs ??
    Math.ceil(
      m.lane.DEFAULT_TURNAROUND_MS + m.lane.CANCEL_SETTLE_MS + direct / m.projection.SAFETY_FACTOR + 20 * 60_000,
    );
  await m.db.db().job.update({
    where: { id: result.jobId },
    data: { budgetSoftMs: soft, budgetHardMs: soft + 600_000, budgetSource: "operator:test" },
  });
  return result.jobId;
}

const queueJobFor = (jobId: string) => ({ id: jobId, data: { jobId } }) as unknown as QueueJob;
/** One run of the job; "pending" when it gave its slot back to wait for its batch. */
async function runOnce(jobId: string, shutdown = new AbortController().signal): Promise<"done" | "pending"> {
  try {
    await m.runtime.runJob({ csv_import: m.csv.csvImport }, queueJobFor(jobId), shutdown, m.log.logger("test"));
    return "done";
  } catch (err) {
    if (err instanceof Error && err.name === "BatchPending") return "pending";
    throw err;
  }
}

/**
 * What the direct finish may overrun its deadline by here: its commits and requests cost the same
 * real milliseconds at any time scale, and at 0.001 its whole window is about 700 ms (a loaded
 * machine took up to 37 ms more). Without the last moment the batch would end hours past it.
 */
const FIXED_COSTS_MS = 150;

const job = (jobId: string) =>
  m.db.db().job.findUniqueOrThrow({
    where: { id: jobId },
    select: { status: true, processed: true, failed: true, cursor: true, wakeUpAt: true, finishedAt: true },
  });
const batchOf = (jobId: string) => m.db.db().jobBatch.findUniqueOrThrow({ where: { jobId } });
const laneEvent = async (jobId: string) =>
  (await m.db.db().jobEvent.findFirstOrThrow({ where: { jobId, type: "lane" } })).message;

/** Rows with a Transaction, and any row written twice. */
async function written(jobId: string): Promise<{ rows: number; twice: number[] }> {
  const groups = await m.db.db().transaction.groupBy({ by: ["row"], where: { jobId }, _count: { _all: true } });
  return { rows: groups.length, twice: groups.filter((g) => g._count._all > 1).map((g) => g.row) };
}

/** Rows whose category came from a direct model call (not from the batch's answers). */
async function directRows(jobId: string): Promise<number> {
  const uses = await m.db.db().categoryAnswerUse.findMany({ where: { jobId }, select: { row: true } });
  const [batch] = await batchCall(jobId);
  return uses.length - (batch?.batchSize ?? 0);
}

/** A counter's value in this process's registry. */
async function counted(name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await m.metrics.processMetrics().registry.getMetricsAsJSON()).find((x) => x.name === name);
  const sample = metric?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return Number(sample?.value ?? 0);
}

async function batchCall(jobId: string) {
  await m.record.flushModelCallRecords();
  return m.db.db().modelCall.findMany({
    where: { jobId, lane: "batch" },
    select: { type: true, batchSize: true, promptTokens: true, completionTokens: true },
  });
}

describe("csv_import on the batch lane", () => {
  it("sends the rows as one batch, gives its slot back while it runs, and commits every row once from its answers", async () => {
    // 40 min at the provider (2.4 s here).
    m.faults.setBatches({ turnaroundMs: 40 * 60_000 });
    const jobId = await importFile("batch-done");

    expect(await runOnce(jobId)).toBe("pending");
    // No slot held: the row waits in delayed until its next look, no row was asked directly.
    const waiting = await job(jobId);
    expect(waiting).toMatchObject({ status: "delayed", processed: 0 });
    const batch = await batchOf(jobId);
    expect(batch).toMatchObject({ rows: ROWS, endedAt: null, fallback: null });
    expect(waiting.wakeUpAt!.getTime()).toBeLessThanOrEqual(batch.lastMomentAt.getTime());
    expect(batch.lastMomentAt.getTime()).toBeLessThan(batch.deadlineAt.getTime());
    expect(await laneEvent(jobId)).toMatch(/^Batch lane: 24 rows to the provider's batch service/);
    expect(chatRequests).toBe(0);
    // The customer's page says where the rows are and when they are expected, in its own words.
    const { progressToken } = await m.db
      .db()
      .job.findUniqueOrThrow({ where: { id: jobId }, select: { progressToken: true } });
    const seen = await m.customer.getCustomerProgress(progressToken);
    const hhmm = (d: Date) => `${d.toISOString().slice(11, 16)} UTC`;
    expect(seen).toMatchObject({ statusLabel: "With the batch service" });
    expect(seen!.message).toContain(
      `Your remaining 24 rows are with the provider's batch service, expected by ${hhmm(batch.expectedBy)}.`,
    );
    expect(seen!.message).toContain(`the import is done by ${hhmm(batch.deadlineAt)}`);

    // Looked at again before it is done: the slot goes back again.
    expect(await runOnce(jobId)).toBe("pending");
    let looks = 1;
    while ((await runOnce(jobId)) === "pending") {
      looks += 1;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(looks).toBeGreaterThan(1);

    expect(await job(jobId)).toMatchObject({ status: "completed", processed: ROWS, failed: 0, cursor: ROWS });
    expect(await written(jobId)).toEqual({ rows: ROWS, twice: [] });
    expect(chatRequests).toBe(0);
    expect(await batchOf(jobId)).toMatchObject({ status: "completed", completed: ROWS, fallback: null });
    const [cost, ...more] = await batchCall(jobId);
    expect(more).toEqual([]);
    expect(cost).toMatchObject({ type: "batch", batchSize: ROWS });
    expect(cost!.promptTokens).toBeGreaterThan(0);
    // What the job page shows: the decision and the batch.
    const lane = await m.lane.getJobLane(jobId);
    expect(lane!.decisions.map((d) => d.message)).toEqual([await laneEvent(jobId)]);
    expect(lane!.batch).toMatchObject({ batchId: batch.batchId, status: "completed", completed: ROWS, rows: ROWS });
  });

  it("with a real worker: while the batch runs the queue job waits in delayed and no slot is taken, then it completes", async () => {
    m.faults.setBatches({ turnaroundMs: 40 * 60_000 });
    // Created without a worker running, its budget set before one takes it.
    const jobId = await importFile("batch-worker", undefined, true);
    const shutdown = new AbortController();
    const connection = m.redis.createRedis("worker");
    const worker = new m.bullmq.Worker(
      "imports",
      m.processor.queueProcessor("imports", {
        processors: m.catalog.PROCESSORS,
        shutdown: shutdown.signal,
        log: m.log.logger("test"),
      }),
      { connection, prefix, concurrency: 1, ...m.reschedule.rescheduleWorkerOptions("imports") },
    );
    worker.on("error", () => undefined);
    try {
      const queue = m.queues.queue("imports");
      const waitFor = async (what: string, probe: () => Promise<boolean>) => {
        const until = Date.now() + 20_000;
        while (!(await probe())) {
          if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      await waitFor("the batch to be sent", async () => (await m.db.db().jobBatch.count({ where: { jobId } })) > 0);
      // It looks at its batch every minute (60 ms here), so it is caught between two looks.
      await waitFor(
        "the slot to be given back",
        async () =>
          (await queue.getJobState(jobId)) === "delayed" &&
          (await job(jobId)).status === "delayed" &&
          (await queue.getActiveCount()) === 0,
      );
      await waitFor("the import to complete", async () => (await job(jobId)).status === "completed");
      expect(await job(jobId)).toMatchObject({ processed: ROWS, failed: 0 });
      expect(await written(jobId)).toEqual({ rows: ROWS, twice: [] });
      expect(chatRequests).toBe(0);
    } finally {
      shutdown.abort();
      await worker.close(true);
      await connection.quit().catch(() => undefined);
    }
  });

  it("at the last moment cancels a batch that is not done, commits its partial answers and finishes the rest directly, by the deadline", async () => {
    const lastMoments = await counted("bounded_batches_ended_total", { kind: "csv_import", outcome: "last_moment" });
    // The provider takes 3 h for it: at the last moment (1 h 20 min in) part of it is answered.
    m.faults.setBatches({ turnaroundMs: 3 * 3_600_000 });
    const jobId = await importFile("batch-late");
    expect(await runOnce(jobId)).toBe("pending");
    const batch = await batchOf(jobId);
    let looks = 0;
    while ((await runOnce(jobId)) === "pending") {
      looks += 1;
      expect(Date.now()).toBeLessThan(batch.lastMomentAt.getTime() + 1_000);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(looks).toBeGreaterThan(0);
    const ended = await batchOf(jobId);
    expect(ended.fallback).toBe("the batch was not done by the last moment");
    expect(await counted("bounded_batches_ended_total", { kind: "csv_import", outcome: "last_moment" })).toBe(
      lastMoments + 1,
    );
    expect(ended.status).toBe("cancelled");
    expect(ended.completed).toBeGreaterThan(0);
    expect(ended.completed).toBeLessThan(ROWS);

    const done = await job(jobId);
    expect(done).toMatchObject({ status: "completed", processed: ROWS, failed: 0 });
    expect(done.finishedAt!.getTime()).toBeLessThanOrEqual(ended.deadlineAt.getTime() + FIXED_COSTS_MS);
    expect(await written(jobId)).toEqual({ rows: ROWS, twice: [] });
    // Only the rows the batch had not answered were asked directly (up to 8 rows a call).
    expect(chatRequests).toBeGreaterThan(0);
    expect(chatRequests).toBeLessThanOrEqual(ROWS - ended.completed);
    expect(await directRows(jobId)).toBe(ROWS - ended.completed);
    expect((await batchCall(jobId))[0]).toMatchObject({ batchSize: ended.completed });
  });

  it("at the last moment a batch service that will not cancel does not fail the job: it finishes directly, every row once, by the deadline", async () => {
    m.faults.setBatches({ turnaroundMs: 3 * 3_600_000 });
    const jobId = await importFile("batch-uncancellable");
    expect(await runOnce(jobId)).toBe("pending");
    const batch = await batchOf(jobId);
    m.faults.setBatches({ failingCancel: true });
    // The refused cancels count against the model's breaker (batch calls share it): the direct
    // finish may first wait for it, as for any outage, and then goes on.
    let outcome: "done" | "pending" | "outage" = "pending";
    try {
      for (let looks = 0; outcome !== "done" && looks < 400; looks++) {
        outcome = await runOnce(jobId).catch((err: unknown) => {
          if (err instanceof Error && err.name === "OutsideServiceDown") return "outage" as const;
          throw err;
        });
        if (outcome !== "done") await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      m.faults.setBatches({ failingCancel: false });
    }
    expect(outcome).toBe("done");
    const ended = await batchOf(jobId);
    expect(ended.fallback).toBe("the batch was not done by the last moment");
    expect(ended.status).toBe("in_progress");
    const done = await job(jobId);
    expect(done).toMatchObject({ status: "completed", processed: ROWS, failed: 0 });
    expect(done.finishedAt!.getTime()).toBeLessThanOrEqual(batch.deadlineAt.getTime() + FIXED_COSTS_MS);
    expect(await written(jobId)).toEqual({ rows: ROWS, twice: [] });
    expect(await directRows(jobId)).toBe(ROWS);
  });

  it("treats an expired batch the same way: its partial answers committed, the rest finished directly", async () => {
    m.faults.setBatches({ expire: true });
    const jobId = await importFile("batch-expired");
    expect(await runOnce(jobId)).toBe("pending");
    clock.ahead += 24 * 3_600_000;
    expect(await runOnce(jobId)).toBe("done");
    const ended = await batchOf(jobId);
    expect(ended).toMatchObject({ status: "expired", fallback: "the batch ended expired at the provider" });
    expect(await job(jobId)).toMatchObject({ status: "completed", processed: ROWS });
    expect(await written(jobId)).toEqual({ rows: ROWS, twice: [] });
    expect(await directRows(jobId)).toBe(ROWS - ended.completed);
  });

  it("an operator's cancel of a job waiting on its batch cancels the batch at the provider too", async () => {
    // A batch that cannot finish during the test (10 min, the default, is 600 ms here).
    m.faults.setBatches({ turnaroundMs: 3 * 3_600_000 });
    const jobId = await importFile("batch-cancelled");
    expect(await runOnce(jobId)).toBe("pending");
    const operator = {
      userId: "00000000-0000-0000-0000-000000000001",
      username: "oncall",
      role: "operator",
      via: "session",
    } as const;
    expect(await m.cancel.cancelJob(jobId, operator)).toMatchObject({ type: "cancelled" });
    expect(await batchOf(jobId)).toMatchObject({ status: "cancelling", fallback: "the job was cancelled" });
    expect((await batchOf(jobId)).endedAt).not.toBeNull();
    expect(await job(jobId)).toMatchObject({ status: "cancelled", processed: 0 });
  });

  /**
   * An import waiting on its batch (3 h: it cannot finish under the test) is run again, and an
   * operator cancels it while its look at the batch is held at the provider. `answerFirst`: the
   * look is answered ("not done") as soon as the cancel is recorded, before the run's next look
   * for a request (every 500 ms); otherwise only after the run ended. The run's end.
   */
  async function cancelWhileLooking(name: string, answerFirst: boolean): Promise<{ jobId: string; ended: unknown }> {
    m.faults.setBatches({ turnaroundMs: 3 * 3_600_000 });
    const jobId = await importFile(name);
    expect(await runOnce(jobId)).toBe("pending");
    let release: () => void = () => undefined;
    lookGate = new Promise((r) => {
      release = r;
    });
    looks = 0;
    const looking = runOnce(jobId).catch((err: Error) => err);
    try {
      const until = Date.now() + 10_000;
      while (looks === 0 || (await job(jobId)).status !== "running") {
        if (Date.now() > until) throw new Error("the run did not look at its batch");
        await new Promise((r) => setTimeout(r, 10));
      }
      const operator = {
        userId: "00000000-0000-0000-0000-000000000001",
        username: "oncall",
        role: "operator",
        via: "session",
      } as const;
      expect(await m.cancel.cancelJob(jobId, operator)).toMatchObject({ type: "cancelling" });
      if (!answerFirst) await looking;
    } finally {
      release();
      lookGate = Promise.resolve();
    }
    return { jobId, ended: await looking };
  }

  it("an operator's cancel while the run looks at its batch cancels the batch at the provider too", async () => {
    const { jobId } = await cancelWhileLooking("batch-cancelled-looking", false);
    expect(await job(jobId)).toMatchObject({ status: "cancelled", processed: 0 });
    expect(await batchOf(jobId)).toMatchObject({ status: "cancelling", fallback: "the job was cancelled" });
    expect((await batchOf(jobId)).endedAt).not.toBeNull();
  });

  it("a cancel asked while the run looks, whose look answers first, ends the job and its batch instead of waiting", async () => {
    const { jobId, ended } = await cancelWhileLooking("batch-cancelled-answered", true);
    expect(ended).toBeInstanceOf(Error);
    expect((ended as Error).name).not.toBe("BatchPending");
    expect(await job(jobId)).toMatchObject({ status: "cancelled", processed: 0 });
    expect(await batchOf(jobId)).toMatchObject({ status: "cancelling", fallback: "the job was cancelled" });
  });

  it("a run stopped after its batch was created but before it was written down takes that batch up: one batch, every row once", async () => {
    const jobId = await importFile("batch-orphan");
    let release: () => void = () => undefined;
    createGate = new Promise((r) => {
      release = r;
    });
    creates = 0;
    const shutdown = new AbortController();
    const stopped = runOnce(jobId, shutdown.signal).catch((err: Error) => err);
    try {
      const until = Date.now() + 10_000;
      while (creates === 0) {
        if (Date.now() > until) throw new Error("the run did not create its batch");
        await new Promise((r) => setTimeout(r, 10));
      }
      // The provider made the batch; the worker stops before it hears so.
      shutdown.abort();
      expect(await stopped).toBeInstanceOf(Error);
    } finally {
      release();
      createGate = Promise.resolve();
    }
    expect(await m.db.db().jobBatch.findUnique({ where: { jobId } })).toBeNull();

    expect(await runOnce(jobId)).toBe("pending");
    expect(creates).toBe(1);
    clock.ahead += 24 * 3_600_000;
    expect(await runOnce(jobId)).toBe("done");
    expect(await job(jobId)).toMatchObject({ status: "completed", processed: ROWS, failed: 0 });
    expect(await written(jobId)).toEqual({ rows: ROWS, twice: [] });
    expect(await directRows(jobId)).toBe(0);
    expect(creates).toBe(1);
  });

  it("a run stopped after the batch's answers committed resumes without asking any of them again", async () => {
    m.faults.setBatches({ expire: true });
    const jobId = await importFile("batch-resume");
    expect(await runOnce(jobId)).toBe("pending");
    clock.ahead += 24 * 3_600_000;
    // The rows the batch did not answer wait for their direct calls; the worker stops meanwhile.
    let release: () => void = () => undefined;
    chatGate = new Promise((r) => {
      release = r;
    });
    const shutdown = new AbortController();
    const stopped = runOnce(jobId, shutdown.signal).catch((err: Error) => err);
    const until = Date.now() + 10_000;
    for (;;) {
      const b = await m.db.db().jobBatch.findUniqueOrThrow({ where: { jobId } });
      if (b.endedAt && (await job(jobId)).processed >= b.completed && chatRequests > 0) break;
      if (Date.now() > until) throw new Error("the batch's answers were not committed");
      await new Promise((r) => setTimeout(r, 20));
    }
    shutdown.abort();
    expect(await stopped).toBeInstanceOf(Error);
    release();
    chatGate = Promise.resolve();
    const ended = await batchOf(jobId);
    const stoppedAt = await job(jobId);
    expect(stoppedAt.processed).toBe(ended.completed);
    // A later run reads the ended batch's answers again from its output (nothing is asked for them).
    const row = await m.db.db().job.findUniqueOrThrow({ where: { id: jobId } });
    const again = await m.lane.throughBatchLane({
      run: { ...row, jobId, total: row.total, params: row.params } as never,
      signal: new AbortController().signal,
      log: m.log.logger("test"),
      service: await import("@/lib/modelcalls/batch-service"),
      model: "bounded-sim-1",
      items: () => Promise.reject(new Error("a job with a batch never decides again")),
    });
    expect(again.size).toBe(ended.completed);

    expect(await runOnce(jobId)).toBe("done");
    expect(await job(jobId)).toMatchObject({ status: "completed", processed: ROWS, failed: 0 });
    expect(await written(jobId)).toEqual({ rows: ROWS, twice: [] });
    // Only the rows the batch did not answer were ever asked directly, and the batch's cost once.
    expect(await directRows(jobId)).toBe(ROWS - ended.completed);
    expect(await batchCall(jobId)).toHaveLength(1);
  });

  it("runs directly after all when the provider has no batch service, and says so", async () => {
    noBatchService = true;
    const jobId = await importFile("batch-none");
    expect(await runOnce(jobId)).toBe("done");
    expect(await job(jobId)).toMatchObject({ status: "completed", processed: ROWS });
    expect(await m.db.db().jobBatch.count({ where: { jobId } })).toBe(0);
    const events = await m.db.db().jobEvent.findMany({ where: { jobId, type: "lane" }, orderBy: { id: "asc" } });
    expect(events.map((e) => e.message)).toEqual([
      expect.stringMatching(/^Batch lane: /),
      expect.stringMatching(/^Direct lane after all: the provider's batch service did not take the batch \(/),
    ]);
    expect(chatRequests).toBeGreaterThan(0);
  });

  it("runs directly when the budget is too short for the batch's turnaround, and says why", async () => {
    const direct = await counted("bounded_batch_lane_decisions_total", { kind: "csv_import", lane: "direct" });
    // 50 min (3 s here): less than the lane's 1 h turnaround alone.
    const jobId = await importFile("batch-short", 50 * 60_000);
    // Decided without reading a row of the file.
    const row = await m.db.db().job.findUniqueOrThrow({ where: { id: jobId } });
    const lane = await m.lane.throughBatchLane({
      run: { ...row, jobId, slotMsUsed: 0 } as never,
      signal: new AbortController().signal,
      log: m.log.logger("test"),
      service: await import("@/lib/modelcalls/batch-service"),
      model: "bounded-sim-1",
      items: () => Promise.reject(new Error("the rows were read")),
    });
    expect(lane.size).toBe(0);
    expect(await runOnce(jobId)).toBe("done");
    expect(await job(jobId)).toMatchObject({ status: "completed", processed: ROWS });
    expect(await m.db.db().jobBatch.count({ where: { jobId } })).toBe(0);
    expect(await laneEvent(jobId)).toMatch(/^Direct lane: .*more than the 50 min left of the budget\.$/);
    expect((await m.lane.getJobLane(jobId))!.batch).toBeNull();
    expect(await counted("bounded_batch_lane_decisions_total", { kind: "csv_import", lane: "direct" })).toBe(
      direct + 1,
    );
    expect(chatRequests).toBeGreaterThan(0);
  });
});
