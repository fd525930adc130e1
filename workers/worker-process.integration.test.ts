import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { waitFor } from "@/test/helpers/wait";
import { distinctWord } from "@/lib/format/distinct-word";

// Real worker processes (node + tsx) against the real PostgreSQL and Redis, killed for real.
// Each test uses its own Redis prefix so no other worker takes its jobs.
const root = `${import.meta.dirname}/..`;
const prefix = `bounded-test-proc-${randomUUID().slice(0, 8)}`;
let modelUrl = "";
let server: http.Server;
/**
 * Model requests answered before the model holds every further one unanswered: a job is then
 * mid-job for as long as a test needs, however fast the rows go (Infinity: none held).
 */
let answerLimit = Number.POSITIVE_INFINITY;
let answered = 0;
const held: http.ServerResponse[] = [];
const children: ChildProcess[] = [];
const tenants: string[] = [];

type Modules = {
  db: typeof import("@/lib/db/client");
  createImport: typeof import("@/lib/imports/create-import");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  tenants: typeof import("@/test/helpers/tenants");
  jobs: typeof import("@/test/helpers/jobs");
  env: typeof import("@/lib/env");
};
let m: Modules;

beforeAll(async () => {
  vi.stubEnv("BOUNDED_REDIS_PREFIX", prefix);
  m = {
    db: await import("@/lib/db/client"),
    createImport: await import("@/lib/imports/create-import"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    tenants: await import("@/test/helpers/tenants"),
    jobs: await import("@/test/helpers/jobs"),
    env: await import("@/lib/env"),
  };
  const { createRouter } = await import("@/workers/simulators/router");
  const { createModelSimulator } = await import("@/workers/simulators/model");
  const model = createRouter(createModelSimulator({ errorRate: 0, timeScale: 0.001 }).routes);
  server = http.createServer((req, res) => {
    if (answered >= answerLimit) held.push(res);
    else {
      answered++;
      model(req, res);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  modelUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  answerLimit = Number.POSITIVE_INFINITY;
  for (const res of held.splice(0)) res.destroy();
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const slug of tenants.splice(0)) await m.tenants.deleteTenant(slug);
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  const redis = m.redis.redis();
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  await m.queues.closeQueues();
  await m.redis.closeRedis();
  await m.db.closeDb();
});

function start(args: string[], extraEnv: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, ["--import", "tsx", ...args], {
    cwd: root,
    env: {
      ...process.env,
      BOUNDED_REDIS_PREFIX: prefix,
      // With /v1, as the OpenAI SDK takes its base URL.
      MODEL_BASE_URL: `${modelUrl}/v1`,
      LOG_LEVEL: "warn",
      BOUNDED_WORKER_CONCURRENCY: "2",
      ...extraEnv,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.resume();
  child.stderr!.resume();
  children.push(child);
  return child;
}

const exited = (c: ChildProcess) =>
  new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (c.exitCode !== null || c.signalCode !== null) resolve({ code: c.exitCode, signal: c.signalCode });
    else c.once("exit", (code, signal) => resolve({ code, signal }));
  });

function csv(rows: number): Uint8Array {
  const lines = ["date,amount,currency,counterparty,description"];
  for (let i = 1; i <= rows; i++)
    lines.push(`2026-01-${String((i % 28) + 1).padStart(2, "0")},-${i}.50,EUR,REWE Markt,row ${distinctWord(i)}`);
  return new TextEncoder().encode(`${lines.join("\n")}\n`);
}

describe("worker processes", () => {
  // Budgets in production seconds at time scale 0.001: soft 60 s, hard 90 s real, so only the crash decides.
  const budgetEnv = { BOUNDED_BUDGET_IMPORTS_SOFT_S: "60000", BOUNDED_BUDGET_IMPORTS_HARD_S: "90000" };

  /**
   * An import of `rows` rows, and a worker process killed with SIGKILL once it is mid-job. The
   * model answers 30 requests (30 to 240 rows: at most 8 a request) and holds the rest until the
   * kill, so the kill always finds rows left.
   */
  async function importKilledMidJob(rows: number, prepare?: (jobId: string) => Promise<void>) {
    const tenant = m.tenants.uniqueTenantSlug("sigkill");
    tenants.push(tenant);
    const created = await m.createImport.createImport({ tenant, filename: "k.csv", bytes: csv(rows) });
    if (created.type !== "created") throw new Error(created.message);
    const jobId = created.jobId;
    await prepare?.(jobId);
    const job = () => m.db.db().job.findUniqueOrThrow({ where: { id: jobId } });
    answered = 0;
    answerLimit = 30;
    const first = start(["workers/main.ts"], budgetEnv);
    await waitFor(async () => (await job()).processed >= 20, {
      timeoutMs: 90_000,
      intervalMs: 50,
      what: "the first worker to be mid-job",
    });
    first.kill("SIGKILL");
    await exited(first);
    answerLimit = Number.POSITIVE_INFINITY;
    for (const res of held.splice(0)) res.destroy();
    const atKill = await job();
    expect(atKill.status).toBe("running");
    expect(atKill.processed + atKill.failed).toBeLessThan(rows);
    return { jobId, job, atKill };
  }

  const terminal = (job: () => Promise<{ status: string }>) =>
    waitFor(
      async () => {
        const j = await job();
        return !["queued", "running", "delayed"].includes(j.status) && j;
      },
      { timeoutMs: 90_000, intervalMs: 100, what: "the job to be terminal" },
    );

  async function expectEveryRowOnce(jobId: string, rows: number) {
    const dupes = await m.db.db().$queryRaw<{ row: number }[]>`
      SELECT row FROM "Transaction" WHERE "jobId" = ${jobId}::uuid GROUP BY row HAVING count(*) > 1`;
    expect(dupes).toEqual([]);
    expect(await m.db.db().transaction.count({ where: { jobId } })).toBe(rows);
  }

  it("a worker SIGKILLed mid-job: another worker takes the stalled job over and completes it from its cursor, every row once", async () => {
    const { jobId, job, atKill } = await importKilledMidJob(400);

    start(["workers/main.ts"], budgetEnv);
    const final = (await terminal(job)) as Awaited<ReturnType<typeof job>>;
    expect(final.status).toBe("completed");
    expect(final.processed).toBe(400);
    expect(final.attempt).toBeGreaterThan(atKill.attempt);
    expect(final.crashResumes).toBe(1);
    await expectEveryRowOnce(jobId, 400);
    const [resumed] = await m.db.db().jobEvent.findMany({ where: { jobId, type: "crash_resumed" } });
    expect(resumed?.message).toMatch(
      /^Attempt 1 stopped without finishing \(its worker died or lost the job\): resumed from where it stopped, after [\d,]+ rows already done \(resume 1 of 3 after a stopped run\)\.$/,
    );
  }, 200_000);

  it("a job whose worker dies once more than the bound allows ends failed, saying so, with its rows kept", async () => {
    // Three resumes already spent: the next death is one too many.
    const { jobId, job } = await importKilledMidJob(400, (id) =>
      m.db
        .db()
        .job.update({ where: { id }, data: { crashResumes: 3 } })
        .then(() => undefined),
    );

    start(["workers/main.ts"], budgetEnv);
    const final = (await terminal(job)) as Awaited<ReturnType<typeof job>>;
    expect(final.status).toBe("failed");
    expect(final.message).toMatch(
      /^Stopped after its worker died 4 times while running it; [\d,]+ of 400 rows were done\. Retry to continue\.$/,
    );
    expect(final.processed).toBeLessThan(400);
    await expectEveryRowOnce(jobId, final.processed);
  }, 200_000);

  it("a running job whose queue entry was lost (Redis forgot it) is resumed by the reaper and completes, every row once", async () => {
    const { jobId, job } = await importKilledMidJob(400);
    // What a Redis restart without persistence does to the queue.
    await m.queues.queue("imports").obliterate({ force: true });

    start(["workers/main.ts"], budgetEnv);
    const final = (await terminal(job)) as Awaited<ReturnType<typeof job>>;
    expect(final.status).toBe("completed");
    expect(final.crashResumes).toBe(1);
    await expectEveryRowOnce(jobId, 400);
    const [resumed] = await m.db.db().jobEvent.findMany({ where: { jobId, type: "crash_resumed" } });
    expect(resumed?.message).toMatch(
      /^Its run stopped and the queue no longer runs it \(queue state: unknown\): resumed/,
    );
  }, 200_000);

  it("a processor that blocks the event loop past its hard limit is killed by the watchdog: the row is killed and the blocked process ends", async () => {
    const tenant = m.tenants.uniqueTenantSlug("cpuloop");
    tenants.push(tenant);
    // soft 200 ms, hard 500 ms real
    const { id } = await m.jobs.makeJob(tenant, { total: 10, softMs: 200_000, hardMs: 500_000 });
    const child = start(["test/fixtures/cpu-loop-worker.ts", id]);
    const { signal } = await exited(child);
    expect(signal).toBe("SIGKILL");
    const row = await m.db.db().job.findUniqueOrThrow({ where: { id } });
    expect(row.status).toBe("killed");
    expect(row.message).toMatch(
      /^Stopped at the hard limit after 0 of 10 rows \(hard limit 500 s\): the job blocked its worker/,
    );
  }, 30_000);
});
