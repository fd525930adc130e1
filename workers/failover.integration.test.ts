import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { distinctWord } from "@/lib/format/distinct-word";
import { waitFor } from "@/test/helpers/wait";
import type { RunningSimulators } from "@/workers/simulators/server";

// A real worker process with a route of two model providers — the primary's key revoked (401), the
// fallback configured right — against both simulated providers, the real PostgreSQL and Redis:
// imports and an agent run complete on the fallback, nothing waits for the primary, and every row
// knows the model that answered it. Time scale 0.05.
const SCALE = 0.05;
const BACKUP_KEY = "sk-bounded-backup-5e2b71";
const root = `${import.meta.dirname}/..`;
const prefix = `bounded-test-failover-${randomUUID().slice(0, 8)}`;
const ROUTING = {
  BOUNDED_MODEL_PROVIDERS: "backup",
  MODEL_BACKUP_NAME: "bounded-sim-backup-1",
  MODEL_BACKUP_API_KEY: BACKUP_KEY,
  BOUNDED_MODEL_ROUTE: "primary,backup",
};
const children: ChildProcess[] = [];
const tenants: string[] = [];
let sims: RunningSimulators;

type Modules = {
  db: typeof import("@/lib/db/client");
  createImport: typeof import("@/lib/imports/create-import");
  createAgentRun: typeof import("@/lib/agents/create-run");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  tenants: typeof import("@/test/helpers/tenants");
  breaker: typeof import("@/lib/ratelimit/breaker");
  stats: typeof import("@/lib/answers/stats");
  progress: typeof import("@/lib/progress/customer-progress");
  reask: typeof import("@/lib/reasks/reask");
};
let m: Modules;

beforeAll(async () => {
  // Before anything parses the environment: this process reads the worker's Redis keys.
  vi.stubEnv("BOUNDED_REDIS_PREFIX", prefix);
  vi.stubEnv("BOUNDED_TIME_SCALE", String(SCALE));
  const { startSimulators } = await import("@/workers/simulators/server");
  sims = await startSimulators({
    model: { errorRate: 0, timeScale: SCALE, apiKey: "sk-bounded-primary-right" },
    backupModel: { errorRate: 0, timeScale: SCALE, apiKey: BACKUP_KEY },
    silent: [],
  });
  // Read on first use, after the fallback's URL is known.
  for (const [name, value] of Object.entries({ ...ROUTING, MODEL_BACKUP_BASE_URL: sims.backupModelBaseUrl }))
    vi.stubEnv(name, value);
  m = {
    db: await import("@/lib/db/client"),
    createImport: await import("@/lib/imports/create-import"),
    createAgentRun: await import("@/lib/agents/create-run"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    tenants: await import("@/test/helpers/tenants"),
    breaker: await import("@/lib/ratelimit/breaker"),
    stats: await import("@/lib/answers/stats"),
    progress: await import("@/lib/progress/customer-progress"),
    reask: await import("@/lib/reasks/reask"),
  };
});

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const slug of tenants.splice(0)) await m.tenants.deleteTenant(slug);
});

afterAll(async () => {
  sims.server.closeAllConnections();
  await new Promise((resolve) => sims.server.close(resolve));
  const redis = m.redis.redis();
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  await m.queues.closeQueues();
  await m.redis.closeRedis();
  await m.db.closeDb();
});

function startWorker(primaryKey = "sk-bounded-primary-revoked", more: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, ["--import", "tsx", "workers/main.ts"], {
    cwd: root,
    env: {
      ...process.env,
      ...ROUTING,
      MODEL_BACKUP_BASE_URL: sims.backupModelBaseUrl,
      BOUNDED_REDIS_PREFIX: prefix,
      BOUNDED_TIME_SCALE: String(SCALE),
      MODEL_BASE_URL: sims.modelBaseUrl,
      MODEL_API_KEY: primaryKey,
      LOG_LEVEL: "warn",
      BOUNDED_WORKER_CONCURRENCY: "4",
      ...more,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.resume();
  child.stderr!.resume();
  children.push(child);
  return child;
}

const OPERATOR = { userId: "u-oncall", username: "oncall", role: "operator", via: "token" } as const;

/** Every one of the jobs ended, and their rows as they ended. */
function ended(jobIds: string[]) {
  return waitFor(
    async () => {
      const all = await m.db.db().job.findMany({
        where: { id: { in: jobIds } },
        select: { id: true, status: true, total: true, processed: true, failed: true, message: true },
      });
      // A message built from the final counts follows the status in a statement of its own (lib/runs/finalize.ts).
      return all.every((j) => !["queued", "running", "delayed"].includes(j.status) && j.message !== null) && all;
    },
    { timeoutMs: 120_000, intervalMs: 100, what: "every job to end" },
  );
}

function csv(rows: number): Uint8Array {
  const lines = ["date,amount,currency,counterparty,description"];
  for (let i = 1; i <= rows; i++)
    lines.push(`2026-01-${String((i % 28) + 1).padStart(2, "0")},-${i}.50,EUR,REWE Markt,row ${distinctWord(i)}`);
  return new TextEncoder().encode(`${lines.join("\n")}\n`);
}

describe("a route of two model providers, the primary's key revoked", () => {
  it("imports and an agent run complete on the fallback without waiting for the primary, fail no item, and each import's rows know the model that answered them", async () => {
    const tenant = m.tenants.uniqueTenantSlug("failover");
    tenants.push(tenant);
    const imports: string[] = [];
    for (let i = 0; i < 2; i++) {
      const created = await m.createImport.createImport({ tenant, filename: `f${i}.csv`, bytes: csv(40) });
      if (created.type !== "created") throw new Error(created.message);
      imports.push(created.jobId);
    }
    const agentRun = (await m.createAgentRun.createAgentRun({ tenant, task: "summarise", steps: 4 })).jobId;
    const jobIds = [...imports, agentRun];
    const worker = startWorker();
    const final = await ended(jobIds);
    for (const j of final)
      expect({ id: j.id, status: j.status, processed: j.processed, failed: j.failed }).toEqual({
        id: j.id,
        status: "completed",
        processed: j.total,
        failed: 0,
      });
    // None of them waited for the primary: no outage wait was written for any.
    expect(await m.db.db().jobEvent.count({ where: { jobId: { in: jobIds }, type: "deferred" } })).toBe(0);
    // The primary refuses our key (misconfigured, probed once per cool-down); the fallback answers.
    const breakers = (await m.breaker.readBreakers())!;
    expect(["misconfigured", "half_open"]).toContain(breakers.find((b) => b.service === "model")?.state);
    expect(breakers.find((b) => b.service === "model:backup")?.state).toBe("closed");
    for (const jobId of imports) {
      expect((await m.stats.getJobAnswerReuse(jobId)).byModel).toEqual([
        { model: "bounded-sim-backup-1", provider: "backup", rows: 40 },
      ]);
      // The customer is told plainly.
      const { progressToken } = await m.db.db().job.findUniqueOrThrow({ where: { id: jobId } });
      expect((await m.progress.getCustomerProgress(progressToken))?.otherModels).toBe(
        "All 40 rows were answered by a backup model (bounded-sim-backup-1) instead of the main one.",
      );
    }
    // Every answered call was the fallback's.
    const answered = await m.db.db().modelCall.groupBy({
      by: ["model"],
      where: { jobId: { in: jobIds }, outcome: "ok", type: "model" },
      _count: true,
    });
    expect(answered.map((a) => a.model)).toEqual(["bounded-sim-backup-1"]);

    // The primary's key put right: an operator asks the rows the fallback answered again on it.
    worker.kill("SIGTERM");
    await new Promise((resolve) => worker.once("exit", resolve));
    startWorker("sk-bounded-primary-right");
    const [first, second] = imports as [string, string];
    const plans = await m.reask.reaskPlans(first);
    expect(plans.find((p) => p.provider === "primary" && p.rows === "fallback")).toMatchObject({
      model: "bounded-sim-1",
      count: 40,
      calls: 5,
    });
    const reasked = await m.reask.reaskRows(first, OPERATOR, { route: "primary", rows: "fallback" });
    if (reasked.type !== "reasked") throw new Error(JSON.stringify(reasked));
    // One re-ask of an import at a time.
    expect(await m.reask.reaskRows(first, OPERATOR, { route: "primary", rows: "all" })).toMatchObject({
      type: "refused",
      code: "reask_open",
    });
    const [reask] = await ended([reasked.jobId]);
    expect(reask).toMatchObject({ status: "completed", processed: 40, failed: 0 });
    expect(reask!.message).toBe(`Asked 40 rows of import ${first} again on primary (bounded-sim-1).`);
    // Each earlier answer kept beside the new one; the import's rows now the primary's.
    const kept = await m.db.db().categoryReask.findMany({ where: { sourceJobId: first }, orderBy: { row: "asc" } });
    expect(kept).toHaveLength(40);
    expect(kept.every((k) => k.previousModel === "bounded-sim-backup-1" && k.model === "bounded-sim-1")).toBe(true);
    expect(kept.every((k) => k.previousSlug !== null && k.slug.length > 0)).toBe(true);
    expect((await m.stats.getJobAnswerReuse(first)).byModel).toEqual([
      { model: "bounded-sim-1", provider: "primary", rows: 40 },
    ]);
    const { progressToken } = await m.db.db().job.findUniqueOrThrow({ where: { id: first } });
    expect((await m.progress.getCustomerProgress(progressToken))?.otherModels).toBeNull();
    // Nothing left for a fallback re-ask of it.
    expect(await m.reask.reaskRows(first, OPERATOR, { route: "primary", rows: "fallback" })).toMatchObject({
      type: "refused",
      code: "no_rows",
    });

    // A row the model had refused (its failure as the import records one): asked again, it is imported.
    const db = m.db.db();
    await db.$transaction([
      db.transaction.delete({ where: { jobId_row: { jobId: second, row: 6 } } }),
      db.categoryAnswerUse.delete({ where: { jobId_row: { jobId: second, row: 6 } } }),
      db.jobItemFailure.create({
        data: {
          jobId: second,
          row: 6,
          attempt: 1,
          reason: "could not be categorised: the model service refused it (HTTP 400)",
        },
      }),
      db.job.update({
        where: { id: second },
        data: {
          processed: 39,
          failed: 1,
          status: "completed_with_errors",
          message: "Imported 39 of 40 rows; 1 row could not be imported (see the list below).",
        },
      }),
    ]);
    const again = await m.reask.reaskRows(second, OPERATOR, { route: "primary", rows: "failed" });
    if (again.type !== "reasked") throw new Error(JSON.stringify(again));
    expect(again.plan.count).toBe(1);
    await ended([again.jobId]);
    expect(
      await db.job.findUniqueOrThrow({
        where: { id: second },
        select: { status: true, processed: true, failed: true, message: true },
      }),
    ).toEqual({
      status: "completed",
      processed: 40,
      failed: 0,
      message: "Imported all 40 rows.",
    });
    expect(await db.jobItemFailure.count({ where: { jobId: second } })).toBe(0);
    expect(await db.transaction.count({ where: { jobId: second } })).toBe(40);
    expect(
      await db.categoryReask.findMany({
        where: { sourceJobId: second },
        select: { row: true, previousSlug: true, model: true },
      }),
    ).toEqual([{ row: 6, previousSlug: null, model: "bounded-sim-1" }]);
  }, 300_000);

  it("past the failover cost ceiling an import does not fail over: it waits for the primary, and its message says which ceiling", async () => {
    const tenant = m.tenants.uniqueTenantSlug("ceiling");
    tenants.push(tenant);
    const created = await m.createImport.createImport({ tenant, filename: "c.csv", bytes: csv(16) });
    if (created.type !== "created") throw new Error(created.message);
    // The fallback priced so that one call's estimate (its prompt and 256 answer tokens) is past a cent.
    startWorker("sk-bounded-primary-revoked", {
      BOUNDED_MODEL_PRICES: JSON.stringify({ "bounded-sim-backup-1": { prompt: 100, completion: 100 } }),
      BOUNDED_FAILOVER_MAX_USD_PER_JOB: "0.01",
    });
    const waiting = await waitFor(
      async () => {
        const job = await m.db.db().job.findUniqueOrThrow({ where: { id: created.jobId } });
        return job.status === "delayed" && job;
      },
      { timeoutMs: 60_000, intervalMs: 100, what: "the import to wait" },
    );
    expect(waiting.message).toMatch(
      /^Waiting for the model service, down since .*; its fallback backup is not asked: another call there \(about \$0\.0\d\d\) would take this job's fallback spend \(\$0 so far, calls in flight included\) past its ceiling of \$0\.010\); it resumes by itself, and nothing is failed for it\.$/,
    );
    expect(waiting.failed).toBe(0);
    // Nothing was sent to the fallback for it.
    expect(await m.db.db().modelCall.count({ where: { jobId: created.jobId, model: "bounded-sim-backup-1" } })).toBe(0);
    await m.db.db().job.update({ where: { id: created.jobId }, data: { status: "cancelled", finishedAt: new Date() } });
  }, 120_000);
});
