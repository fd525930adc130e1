import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { Registry } from "prom-client";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { waitFor } from "@/test/helpers/wait";
import type { RunningSimulators } from "@/workers/simulators/server";
import { distinctWord } from "@/lib/format/distinct-word";

// A real worker process pointed at the model service with a wrong key (401), then a wrong URL
// (404), then the right configuration — restarted each time, as an operator would — against the
// model simulator checking its API key, the real PostgreSQL and Redis. Time scale 0.05: the
// breaker's cool-down between probes (30 s production) is 1.5 s.
const SCALE = 0.05;
const RIGHT_KEY = "sk-bounded-right-4f1c9a";
const WRONG_KEY = "sk-bounded-wrong-77d2e0";
const root = `${import.meta.dirname}/..`;
const prefix = `bounded-test-misconf-${randomUUID().slice(0, 8)}`;
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
  metrics: typeof import("@/lib/metrics/metrics");
  sources: typeof import("@/lib/reports/metric-sources");
};
let m: Modules;

beforeAll(async () => {
  vi.stubEnv("BOUNDED_REDIS_PREFIX", prefix);
  vi.stubEnv("BOUNDED_TIME_SCALE", String(SCALE));
  m = {
    db: await import("@/lib/db/client"),
    createImport: await import("@/lib/imports/create-import"),
    createAgentRun: await import("@/lib/agents/create-run"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    tenants: await import("@/test/helpers/tenants"),
    breaker: await import("@/lib/ratelimit/breaker"),
    metrics: await import("@/lib/metrics/metrics"),
    sources: await import("@/lib/reports/metric-sources"),
  };
  const { startSimulators } = await import("@/workers/simulators/server");
  sims = await startSimulators({ model: { errorRate: 0, timeScale: SCALE, apiKey: RIGHT_KEY }, silent: [] });
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

function startWorker(config: { baseUrl: string; apiKey: string }): ChildProcess {
  const child = spawn(process.execPath, ["--import", "tsx", "workers/main.ts"], {
    cwd: root,
    env: {
      ...process.env,
      BOUNDED_REDIS_PREFIX: prefix,
      BOUNDED_TIME_SCALE: String(SCALE),
      MODEL_BASE_URL: config.baseUrl,
      MODEL_API_KEY: config.apiKey,
      LOG_LEVEL: "warn",
      BOUNDED_WORKER_CONCURRENCY: "4",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.resume();
  child.stderr!.resume();
  children.push(child);
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

function csv(rows: number): Uint8Array {
  const lines = ["date,amount,currency,counterparty,description"];
  for (let i = 1; i <= rows; i++)
    lines.push(`2026-01-${String((i % 28) + 1).padStart(2, "0")},-${i}.50,EUR,REWE Markt,row ${distinctWord(i)}`);
  return new TextEncoder().encode(`${lines.join("\n")}\n`);
}

/** `bounded_outside_service_up{service="model"}` as /api/metrics reads it (the breakers in Redis, at scrape time). */
async function modelUp(): Promise<string | undefined> {
  const registry = new Registry();
  m.metrics.createMetrics(registry, {
    defaultMetrics: false,
    outsideServices: m.sources.DATABASE_SOURCES.outsideServices,
  });
  return /bounded_outside_service_up\{service="model"\} (\d)/.exec(await registry.metrics())?.[1];
}

const modelBreaker = async () => (await m.breaker.readBreakers())?.find((b) => b.service === "model");

describe("the model service misconfigured", () => {
  it("a wrong key (401) or URL (404) fails no item: the breaker is misconfigured with the provider's words, the URL and the model, never the key; jobs wait, and a restart with the right configuration completes every row", async () => {
    const tenant = m.tenants.uniqueTenantSlug("misconfigured");
    tenants.push(tenant);
    const jobIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await m.createImport.createImport({ tenant, filename: `m${i}.csv`, bytes: csv(40) });
      if (created.type !== "created") throw new Error(created.message);
      jobIds.push(created.jobId);
    }
    jobIds.push((await m.createAgentRun.createAgentRun({ tenant, task: "summarise", steps: 4 })).jobId);
    const jobs = () =>
      m.db.db().job.findMany({
        where: { id: { in: jobIds } },
        select: { id: true, status: true, total: true, processed: true, failed: true, message: true },
      });
    const itemFailures = () => m.db.db().jobItemFailure.count({ where: { jobId: { in: jobIds } } });

    // A revoked key.
    let worker = startWorker({ baseUrl: sims.modelBaseUrl, apiKey: WRONG_KEY });
    const wrongKey = await waitFor(
      async () => ((await modelBreaker())?.error?.includes("API key") ? (await modelBreaker())! : null),
      {
        timeoutMs: 90_000,
        intervalMs: 50,
        what: "the model's breaker to say the key was refused",
      },
    );
    expect(["misconfigured", "half_open"]).toContain(wrongKey.state);
    expect(wrongKey.error).toMatch(/^misconfigured: HTTP 401: Incorrect API key provided/);
    expect(wrongKey.error).toContain(`POST ${sims.modelBaseUrl}/chat/completions, model `);
    expect(wrongKey.error).not.toContain(WRONG_KEY);
    expect(wrongKey.error).not.toContain(WRONG_KEY.slice(-6));
    // What / and /queues show (the outside-services banner) and what Prometheus scrapes.
    expect(m.breaker.outageCause(wrongKey.error)).toMatch(
      /^it refuses our configuration — HTTP 401: Incorrect API key provided/,
    );
    expect(await modelUp()).toBe("0");
    // Jobs wait: none ended, no item failed.
    await waitFor(async () => (await jobs()).some((j) => j.status === "delayed"), {
      timeoutMs: 30_000,
      intervalMs: 50,
      what: "a job waiting for the model service",
    });
    for (const j of await jobs()) expect(["queued", "running", "delayed"]).toContain(j.status);
    expect(await itemFailures()).toBe(0);

    // Restarted with the right key but a wrong path: the next probe says so.
    await stop(worker);
    const wrongUrl = `${sims.url}/api/v1`;
    worker = startWorker({ baseUrl: wrongUrl, apiKey: RIGHT_KEY });
    const wrongPath = await waitFor(
      async () =>
        (await modelBreaker())?.error?.includes("/api/v1/chat/completions") ? (await modelBreaker())! : null,
      {
        timeoutMs: 90_000,
        intervalMs: 50,
        what: "the model's breaker to name the wrong URL",
      },
    );
    expect(wrongPath.error).toMatch(/^misconfigured: HTTP 404: /);
    expect(await modelUp()).toBe("0");
    for (const j of await jobs()) expect(["queued", "running", "delayed"]).toContain(j.status);
    expect(await itemFailures()).toBe(0);

    // Restarted with the right configuration: everything resumes by itself.
    await stop(worker);
    startWorker({ baseUrl: sims.modelBaseUrl, apiKey: RIGHT_KEY });
    const final = await waitFor(
      async () => {
        const all = await jobs();
        return all.every((j) => !["queued", "running", "delayed"].includes(j.status)) && all;
      },
      { timeoutMs: 120_000, intervalMs: 100, what: "every job to end" },
    );
    for (const j of final)
      expect({ id: j.id, status: j.status, processed: j.processed, failed: j.failed }).toEqual({
        id: j.id,
        status: "completed",
        processed: j.total,
        failed: 0,
      });
    expect(await itemFailures()).toBe(0);
    expect(await m.db.db().transaction.count({ where: { jobId: { in: jobIds.slice(0, 3) } } })).toBe(120);
    expect((await modelBreaker())?.state).toBe("closed");
    expect(await modelUp()).toBe("1");
  }, 300_000);
});
