import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Job as QueueJob } from "bullmq";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";

// As in csv-import.integration.test.ts: the model simulator's port is taken first, the
// environment (budgets included: they are production seconds, × the 0.001 test time scale) is
// stubbed, and only then is anything from the project imported.

let server: http.Server;
let handle: http.RequestListener = (_req, res) => res.writeHead(503).end();
let modelRequests = 0;
let onModelRequest: (count: number) => void | Promise<void> = () => {};
/** Production latency of the next simulated model call; null = production's distribution. */
let modelLatencyMs: number | null = null;

type Modules = {
  db: typeof import("@/lib/db/client");
  env: typeof import("@/lib/env");
  log: typeof import("@/lib/log");
  createRun: typeof import("@/lib/agents/create-run");
  plan: typeof import("@/lib/agents/plan");
  errors: typeof import("@/lib/core/signals");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  record: typeof import("@/lib/modelcalls/record");
  runtime: typeof import("@/lib/runs/run-job");
  agent: typeof import("./agent-run");
  tenants: typeof import("@/test/helpers/tenants");
  answering: typeof import("@/test/helpers/answering-service");
};
let m: Modules;

beforeAll(async () => {
  server = http.createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  vi.stubEnv("MODEL_BASE_URL", `http://127.0.0.1:${port}/v1`);
  vi.stubEnv("BOUNDED_SIM_MODEL_ERROR_RATE", "0");
  // Batch runs: a budget no test comes near. Interactive runs: 200 s soft / 400 s hard, i.e.
  // 200 ms / 400 ms at the test time scale — tight, as for a person waiting.
  vi.stubEnv("BOUNDED_BUDGET_AGENT_BATCH_SOFT_S", "600000");
  vi.stubEnv("BOUNDED_BUDGET_AGENT_BATCH_HARD_S", "900000");
  vi.stubEnv("BOUNDED_BUDGET_AGENT_INTERACTIVE_SOFT_S", "200");
  vi.stubEnv("BOUNDED_BUDGET_AGENT_INTERACTIVE_HARD_S", "400");

  m = {
    db: await import("@/lib/db/client"),
    env: await import("@/lib/env"),
    log: await import("@/lib/log"),
    createRun: await import("@/lib/agents/create-run"),
    plan: await import("@/lib/agents/plan"),
    errors: await import("@/lib/core/signals"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    record: await import("@/lib/modelcalls/record"),
    runtime: await import("@/lib/runs/run-job"),
    agent: await import("./agent-run"),
    tenants: await import("@/test/helpers/tenants"),
    answering: await import("@/test/helpers/answering-service"),
  };
  expect(m.env.env().BOUNDED_BUDGET_AGENT_INTERACTIVE_SOFT_S).toBe(200);

  const { createRouter } = await import("@/workers/simulators/router");
  const { createModelSimulator, sampleModelLatencyMs } = await import("@/workers/simulators/model");
  const simulator = createRouter(
    createModelSimulator({
      errorRate: 0,
      timeScale: m.env.env().BOUNDED_TIME_SCALE,
      latencyMs: () => modelLatencyMs ?? sampleModelLatencyMs(),
    }).routes,
  );
  handle = (req, res) => {
    if (req.url !== "/v1/chat/completions") return simulator(req, res);
    modelRequests += 1;
    void Promise.resolve(onModelRequest(modelRequests)).then(() => simulator(req, res));
  };
});

const tenants: string[] = [];

afterEach(async () => {
  onModelRequest = () => {};
  modelRequests = 0;
  modelLatencyMs = null;
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

async function start(label: string, body: { task: string; steps: number; interactive?: boolean }): Promise<string> {
  const tenant = m.tenants.uniqueTenantSlug(label);
  tenants.push(tenant);
  const run = await m.createRun.createAgentRun({ tenant, ...body });
  await m.queues.queue(run.queue).remove(run.jobId);
  return run.jobId;
}

const queueJobFor = (jobId: string) => ({ id: jobId, data: { jobId } }) as unknown as QueueJob;
const runOnce = (jobId: string, signal: AbortSignal = new AbortController().signal) =>
  m.runtime.runJob({ agent_run: m.agent.agentRun }, queueJobFor(jobId), signal, m.log.logger("test"));

const jobRow = (jobId: string) =>
  m.db.db().job.findUniqueOrThrow({
    where: { id: jobId },
    select: {
      status: true,
      queue: true,
      total: true,
      processed: true,
      failed: true,
      cursor: true,
      message: true,
      result: true,
      budgetSoftMs: true,
    },
  });

async function calls(jobId: string) {
  await m.record.flushModelCallRecords();
  return m.db.db().modelCall.findMany({
    where: { jobId },
    select: { type: true, model: true, outcome: true, jobKind: true, queue: true },
    orderBy: { id: "asc" },
  });
}

type Result = {
  task: string;
  answer: string;
  steps: { step: number; note: string; tools: { tool: string; output: Record<string, unknown> }[] }[];
};

describe("agent_run through the runtime, against the model simulator", () => {
  it("runs every step (one model call, then 1–3 tools) and stores the final answer in the job's result", async () => {
    const task = "Convert 120 USD and 80 GBP to EUR";
    const jobId = await start("answer", { task, steps: 6 });

    await runOnce(jobId);

    const job = await jobRow(jobId);
    expect(job).toMatchObject({
      status: "completed",
      queue: "agent-batch",
      total: 6,
      processed: 6,
      failed: 0,
      cursor: 6,
      message: "Finished all 6 steps.",
    });
    const result = job.result as unknown as Result;
    expect(result.steps.map((s) => [s.step, s.tools.map((t) => t.tool)])).toEqual([
      [1, ["lookup_rate"]],
      [2, ["lookup_rate", "convert_amount"]],
      [3, ["lookup_rate", "convert_amount", "format_line"]],
      [4, ["lookup_rate"]],
      [5, ["lookup_rate", "convert_amount"]],
      [6, ["lookup_rate", "convert_amount", "format_line"]],
    ]);
    expect(result.steps[2]!.tools[2]!.output).toEqual({ line: "120.00 USD ≈ 111.11 EUR" });
    expect(result.answer).toBe(m.plan.composeAnswer(task, result.steps as never, 6));
    expect(result.answer).toBe(
      "6 of 6 steps done for “Convert 120 USD and 80 GBP to EUR”. Rates per EUR: USD 1.08, GBP 0.86. " +
        "4 conversions totalling 408.26 EUR. 120.00 USD ≈ 111.11 EUR; 80.00 GBP ≈ 93.02 EUR.",
    );
  });

  it("records the model calls as type model and each tool call as type tool under the tool's name", async () => {
    const jobId = await start("calls", { task: "Convert 120 USD and 80 GBP to EUR", steps: 6 });

    await runOnce(jobId);

    const rows = await calls(jobId);
    expect(rows.filter((c) => c.type === "model")).toHaveLength(6);
    const tools = rows.filter((c) => c.type === "tool");
    expect(tools.map((c) => c.model).sort()).toEqual(
      [...Array(6).fill("lookup_rate"), ...Array(4).fill("convert_amount"), ...Array(2).fill("format_line")].sort(),
    );
    for (const c of rows) expect(c).toMatchObject({ outcome: "ok", jobKind: "agent_run", queue: "agent-batch" });
    expect(modelRequests).toBe(6);
  });

  it("a tool that refuses its input fails that step only; the answer says how many steps failed", async () => {
    const task = "Convert 10 USD and 20 XYZ";
    const jobId = await start("tool-error", { task, steps: 4 });

    await runOnce(jobId);

    const job = await jobRow(jobId);
    expect(job).toMatchObject({
      status: "completed_with_errors",
      processed: 2,
      failed: 2,
      message: "Finished 2 of 4 steps; 2 steps failed (see the list below).",
    });
    const reason =
      "tool lookup_rate failed: no exchange rate for “XYZ” (known: EUR, USD, GBP, CHF, SEK, NOK, DKK, PLN, CZK, JPY, CAD, AUD)";
    expect(
      await m.db
        .db()
        .jobItemFailure.findMany({ where: { jobId }, select: { row: true, reason: true }, orderBy: { row: "asc" } }),
    ).toEqual([
      { row: 2, reason: `step 2: ${reason}` },
      { row: 4, reason: `step 4: ${reason}` },
    ]);
    expect((job.result as unknown as Result).answer).toMatch(/^2 of 4 steps done \(2 failed\)/);
    const toolRows = (await calls(jobId)).filter((c) => c.type === "tool");
    expect(toolRows.filter((c) => c.outcome === "error").map((c) => c.model)).toEqual(["lookup_rate", "lookup_rate"]);
  });

  it("an interactive run goes to agent-interactive; at its tight soft limit the in-flight model call, slow while the service answers other callers, is aborted and the job is timed_out", async () => {
    const jobId = await start("deadline", { task: "Convert 5 CHF", steps: 5, interactive: true });
    // 1,000 s per model call in production time (1 s here): far past the 200 s budget.
    modelLatencyMs = 1_000_000;

    // Slow, not silent: the model service answers other callers meanwhile.
    const stopAnswering = m.answering.answeringService("model");
    const startedAt = Date.now();
    await expect(runOnce(jobId)).rejects.toThrow("soft limit reached").finally(stopAnswering);

    expect(Date.now() - startedAt).toBeLessThan(1_000);
    const job = await jobRow(jobId);
    expect(job).toMatchObject({
      status: "timed_out",
      queue: "agent-interactive",
      budgetSoftMs: 200_000,
      processed: 0,
      failed: 0,
    });
    expect(job.message).toBe(
      "Timed out after 0 of 5 steps (budget 200 s). Retry with a larger budget or give the agent a smaller task.",
    );
    expect(await calls(jobId)).toEqual([
      {
        type: "model",
        model: m.env.env().MODEL_NAME,
        outcome: "aborted",
        jobKind: "agent_run",
        queue: "agent-interactive",
      },
    ]);
    // The deadline is not a failed step.
    expect(await m.db.db().jobItemFailure.count({ where: { jobId } })).toBe(0);
  });

  it("a run stopped part-way resumes at its cursor: each step is in the result exactly once", async () => {
    const jobId = await start("resume", { task: "Convert 30 SEK", steps: 5 });
    const stop = new AbortController();
    const reason = new m.errors.WorkerShutdown("worker shutting down");
    onModelRequest = (n) => {
      if (n === 3) stop.abort(reason);
    };

    await expect(runOnce(jobId, stop.signal)).rejects.toBe(reason);
    const first = await jobRow(jobId);
    expect(first).toMatchObject({ status: "queued", cursor: 2, processed: 2 });
    expect((first.result as unknown as Result).steps.map((s) => s.step)).toEqual([1, 2]);

    onModelRequest = () => {};
    await m.db.db().job.update({ where: { id: jobId }, data: { status: "queued" } });
    await runOnce(jobId);

    const job = await jobRow(jobId);
    expect(job).toMatchObject({ status: "completed", processed: 5, cursor: 5 });
    expect((job.result as unknown as Result).steps.map((s) => s.step)).toEqual([1, 2, 3, 4, 5]);
    expect((job.result as unknown as Result).answer).toMatch(/^5 of 5 steps done for “Convert 30 SEK”/);
  });
});

describe("createAgentRun validates before anything is created", () => {
  it.each([
    [{ task: "x", steps: 0 }, "steps", "steps must be at least 1"],
    [{ task: "x", steps: 51 }, "steps", "steps must be at most 50"],
    [{ task: "x", steps: 2.5 }, "steps", "steps must be a whole number from 1 to 50"],
    [{ task: "   ", steps: 3 }, "task", "task is empty"],
    [{ steps: 3 }, "task", "task is required"],
    [{ task: "x", steps: 3, interactive: "yes" }, "interactive", "interactive must be true or false"],
  ])("%j is refused (%s)", async (body, path, message) => {
    const tenant = m.tenants.uniqueTenantSlug("invalid");
    const error = await m.createRun.createAgentRun({ tenant, ...body }).catch((e: unknown) => e);
    expect((error as Error).name).toBe("ZodError");
    expect((error as { issues: { path: string[]; message: string }[] }).issues[0]).toMatchObject({
      path: [path],
      message,
    });
    expect(await m.db.db().tenant.findUnique({ where: { slug: tenant } })).toBeNull();
  });
});
