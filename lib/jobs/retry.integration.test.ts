import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Principal } from "@/lib/auth/roles";

// Retry against the real database, the real queue and the runtime with the model simulator.
const operator: Principal = { userId: "00000000-0000-0000-0000-000000000001", username: "oncall", role: "operator", via: "session" };
const tenants: string[] = [];
let server: http.Server;

type Modules = {
  db: typeof import("@/lib/db/client");
  retry: typeof import("./retry");
  createImport: typeof import("@/lib/imports/create-import");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  runtime: typeof import("@/workers/runtime");
  csv: typeof import("@/workers/processors/csv-import");
  log: typeof import("@/lib/log");
  tenants: typeof import("@/test/helpers/tenants");
  jobs: typeof import("@/test/helpers/jobs");
};
let m: Modules;

beforeAll(async () => {
  let handle: http.RequestListener = () => undefined;
  server = http.createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  vi.stubEnv("MODEL_BASE_URL", `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_SOFT_S", "600000");
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_HARD_S", "900000");
  const { createRouter } = await import("@/workers/simulators/router");
  const { createModelSimulator } = await import("@/workers/simulators/model");
  handle = createRouter(createModelSimulator({ errorRate: 0, timeScale: 0.0002 }).routes);
  m = {
    db: await import("@/lib/db/client"),
    retry: await import("./retry"),
    createImport: await import("@/lib/imports/create-import"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    runtime: await import("@/workers/runtime"),
    csv: await import("@/workers/processors/csv-import"),
    log: await import("@/lib/log"),
    tenants: await import("@/test/helpers/tenants"),
    jobs: await import("@/test/helpers/jobs"),
  };
});

afterAll(async () => {
  for (const slug of tenants) await m.tenants.deleteTenant(slug);
  await m.queues.closeQueues();
  await m.redis.closeRedis();
  await m.db.closeDb();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function importOf(rows: number) {
  const lines = ["date,amount,currency,counterparty,description"];
  for (let i = 1; i <= rows; i++) lines.push(`2026-03-${String((i % 28) + 1).padStart(2, "0")},-${i}.10,EUR,REWE Markt,row ${i}`);
  const tenant = m.tenants.uniqueTenantSlug("retry");
  tenants.push(tenant);
  const created = await m.createImport.createImport({ tenant, filename: "r.csv", bytes: new TextEncoder().encode(lines.join("\n")) });
  if (created.type !== "created") throw new Error(created.message);
  await m.queues.queue("imports").remove(created.jobId);
  return created.jobId;
}

const run = (jobId: string, signal = new AbortController().signal) =>
  m.runtime.runJob({ csv_import: m.csv.csvImport }, m.jobs.queueJobFor(jobId), signal, m.log.logger("test")).catch((err: Error) => err);

describe("retryJob", () => {
  it("twenty concurrent retries of one job create exactly one new attempt", async () => {
    const jobId = await importOf(3);
    await m.db.db().job.update({ where: { id: jobId }, data: { status: "timed_out", attempt: 1, cursor: 1, processed: 1 } });

    const results = await Promise.all(Array.from({ length: 20 }, () => m.retry.retryJob(jobId, operator)));

    expect(results.filter((r) => r.type === "retried")).toHaveLength(1);
    expect(results.filter((r) => r.type === "not_retryable")).toHaveLength(19);
    const events = await m.db.db().jobEvent.findMany({ where: { jobId, type: "retry" } });
    expect(events).toHaveLength(1);
    const queued = await m.queues.queue("imports").getJob(jobId);
    expect(queued?.data).toEqual({ jobId });
    expect(await queued?.getState()).toBe("waiting");

    await m.queues.queue("imports").remove(jobId);
    await run(jobId);
    const row = await m.db.db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(row).toMatchObject({ status: "completed", attempt: 2 });
  });

  it("resumes at the cursor: rows done before the timeout are not redone and no Transaction is written twice", async () => {
    const jobId = await importOf(60);
    // The first run is stopped after ~20 rows, as a soft limit would.
    const first = new AbortController();
    const watching = setInterval(async () => {
      const { cursor } = await m.db.db().job.findUniqueOrThrow({ where: { id: jobId }, select: { cursor: true } });
      if (cursor >= 20) first.abort(new (await import("./errors")).WorkerShutdown("stop"));
    }, 5);
    await run(jobId, first.signal);
    clearInterval(watching);
    await m.db.db().job.update({ where: { id: jobId }, data: { status: "timed_out" } });
    const before = await m.db.db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(before.cursor).toBeGreaterThanOrEqual(20);
    expect(before.cursor).toBeLessThan(60);

    const retried = await m.retry.retryJob(jobId, operator);
    expect(retried).toMatchObject({ type: "retried", resumesAt: before.cursor });
    await m.queues.queue("imports").remove(jobId);
    await run(jobId);

    const after = await m.db.db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(after).toMatchObject({ status: "completed", processed: 60, cursor: 60, attempt: before.attempt + 1 });
    const dupes = await m.db.db().$queryRaw<{ row: number }[]>`SELECT row FROM "Transaction" WHERE "jobId" = ${jobId}::uuid GROUP BY row HAVING count(*) > 1`;
    expect(dupes).toEqual([]);
    expect(await m.db.db().transaction.count({ where: { jobId } })).toBe(60);
    // Each row's model call happened once: the resumed run did not re-ask for done rows.
    expect(await m.db.db().modelCall.count({ where: { jobId, outcome: "ok" } })).toBe(60);
  });

  it("refuses jobs that are queued, running, delayed or completed, with the reason", async () => {
    const jobId = await importOf(2);
    for (const status of ["queued", "running", "delayed", "completed"] as const) {
      await m.db.db().job.update({ where: { id: jobId }, data: { status } });
      const r = await m.retry.retryJob(jobId, operator);
      expect(r).toMatchObject({ type: "not_retryable", status });
    }
    expect(await m.retry.retryJob("not-a-uuid", operator)).toEqual({ type: "not_found" });
  });

  it("takes a larger budget within bounds, recorded as the operator's, and refuses one out of bounds", async () => {
    const jobId = await importOf(2);
    await m.db.db().job.update({ where: { id: jobId }, data: { status: "killed" } });
    expect(await m.retry.retryJob(jobId, operator, { budgetSoftS: 600_000 * 5 })).toMatchObject({ type: "budget_out_of_bounds" });
    const r = await m.retry.retryJob(jobId, operator, { budgetSoftS: 1_200_000 });
    expect(r).toMatchObject({ type: "retried", budgetSoftMs: 1_200_000_000, budgetHardMs: 1_800_000_000 });
    const row = await m.db.db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(row.budgetSource).toBe("operator:oncall");
    await m.queues.queue("imports").remove(jobId);
  });
});
