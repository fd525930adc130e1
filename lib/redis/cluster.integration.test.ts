import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { promisify } from "node:util";
import { Queue, Worker } from "bullmq";
import { Cluster } from "ioredis";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { onPath, requiredTool } from "@/test/helpers/required-tool";
import { waitFor } from "@/test/helpers/wait";

/**
 * Bounded against a real Redis Cluster of its own: three masters on ports 7301–7303, created
 * here and stopped at the end. The code under test is the project's own (connections, prefix,
 * queues, limiter, metrics, budgets, health, login), configured only through the environment.
 */

const PORTS = [7301, 7302, 7303] as const;
const PREFIX = "{bounded-cluster-test}";
const run = promisify(execFile);

const title = "Bounded on a 3-master Redis Cluster (ports 7301–7303)";
const redisServer = requiredTool("redis-server", onPath("redis-server"), "redis-server");
const redisCliTool = requiredTool("redis-cli", onPath("redis-cli"), "redis-tools");

const redisCli = async (...args: string[]) => (await run("redis-cli", args, { timeout: 30_000 })).stdout;

/** A server still starting refuses redis-cli's connection: that is "not yet", not a broken probe. */
const untilUp = (what: string, check: () => Promise<boolean>) =>
  waitFor(check, { what, timeoutMs: 20_000, intervalMs: 50, retryErrors: true });

const servers: ChildProcess[] = [];
let dir: string | undefined;

/** A server on `port` that is ours: another Redis already listening there must not pass for it. */
async function startServer(port: number): Promise<void> {
  const server = spawn(
    "redis-server",
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      `nodes-${port}.conf`,
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir!,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  servers.push(server);
  let output = "";
  server.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  server.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  await untilUp(
    `redis-server on port ${port}`,
    async () =>
      server.exitCode !== null ||
      (await redisCli("-p", String(port), "info", "server")).includes(`process_id:${server.pid}\r`),
  );
  if (server.exitCode !== null)
    throw new Error(`redis-server on port ${port} exited: ${output.trim().split("\n").slice(-3).join(" | ")}`);
}

async function stopServers(): Promise<void> {
  await Promise.all(
    servers.splice(0).map(async (server) => {
      if (server.exitCode !== null) return;
      const exited = new Promise((resolve) => server.once("exit", resolve));
      server.kill("SIGTERM");
      await Promise.race([exited, delay(5_000)]);
      if (server.exitCode === null) server.kill("SIGKILL");
    }),
  );
}

type Modules = {
  env: typeof import("@/lib/env");
  client: typeof import("./client");
  queues: typeof import("@/lib/queues/queues");
  limiter: typeof import("@/lib/ratelimit/limiter");
  buckets: typeof import("@/lib/ratelimit/buckets");
  publish: typeof import("@/lib/reports/metrics-publish");
  metrics: typeof import("@/lib/metrics/metrics");
  runtime: typeof import("@/lib/budgets/runtime");
  health: typeof import("@/lib/reports/health");
  presence: typeof import("@/lib/queues/presence");
  login: typeof import("@/lib/auth/login");
  db: typeof import("@/lib/db/client");
};

describe.skipIf(redisServer.skip || redisCliTool.skip)(`${title} (${redisServer.note}, ${redisCliTool.note})`, () => {
  let m: Modules;

  beforeAll(async () => {
    redisServer.ensure();
    redisCliTool.ensure();
    dir = mkdtempSync(path.join(tmpdir(), "bounded-cluster-"));
    await Promise.all(PORTS.map(startServer));
    await redisCli(
      "--cluster",
      "create",
      ...PORTS.map((p) => `127.0.0.1:${p}`),
      "--cluster-replicas",
      "0",
      "--cluster-yes",
    );
    for (const port of PORTS) {
      await untilUp(`cluster_state:ok on port ${port}`, async () =>
        (await redisCli("-p", String(port), "cluster", "info")).includes("cluster_state:ok"),
      );
    }
    // Before the first import: modules read the environment once, on first use.
    vi.stubEnv("BOUNDED_REDIS_CLUSTER", "1");
    vi.stubEnv("REDIS_URL", `redis://127.0.0.1:${PORTS[0]}`);
    vi.stubEnv("BOUNDED_REDIS_PREFIX", PREFIX);
    m = {
      env: await import("@/lib/env"),
      client: await import("./client"),
      queues: await import("@/lib/queues/queues"),
      limiter: await import("@/lib/ratelimit/limiter"),
      buckets: await import("@/lib/ratelimit/buckets"),
      publish: await import("@/lib/reports/metrics-publish"),
      metrics: await import("@/lib/metrics/metrics"),
      runtime: await import("@/lib/budgets/runtime"),
      health: await import("@/lib/reports/health"),
      presence: await import("@/lib/queues/presence"),
      login: await import("@/lib/auth/login"),
      db: await import("@/lib/db/client"),
    };
  });

  afterAll(async () => {
    await m?.queues.closeQueues();
    await m?.client.closeRedis();
    await m?.db.closeDb();
    await stopServers();
    if (dir) rmSync(dir, { recursive: true, force: true });
    vi.unstubAllEnvs();
  });

  it("the environment gives a Cluster client that discovered all three masters from the one seed node", async () => {
    const client = m.client.redis();
    expect(client).toBeInstanceOf(Cluster);
    await client.ping();
    expect((client as Cluster).nodes("master")).toHaveLength(3);
    expect(m.env.env().BOUNDED_REDIS_PREFIX).toBe(PREFIX);
  });

  it("scanKeys finds keys on every master, not only on the node a SCAN happens to reach", async () => {
    const client = m.client.redis();
    // Different hash tags land in different slots, so these keys spread over the three masters.
    const keys = Array.from({ length: 30 }, (_, i) => `scan-test:{spread-${i}}`);
    await Promise.all(keys.map((k) => client.set(k, "1", "PX", 60_000)));
    // Each master's own view (KEYS on the node itself, independent of scanKeys).
    const perMaster = await Promise.all((client as Cluster).nodes("master").map((node) => node.keys("scan-test:*")));
    expect(perMaster.map((found) => found.length > 0)).toEqual([true, true, true]);

    const found = new Set<string>();
    for await (const batch of m.client.scanKeys(client, "scan-test:*", 5)) for (const k of batch) found.add(k);
    expect([...found].sort()).toEqual([...keys].sort());
    await Promise.all(keys.map((k) => client.del(k)));
  });

  it("BullMQ: a job added through the project's queue is processed by a Worker on the project's worker connection and prefix", async () => {
    const connection = m.client.createRedis("worker");
    let settle!: { resolve: (result: unknown) => void; reject: (err: Error) => void };
    const done = new Promise<unknown>((resolve, reject) => (settle = { resolve, reject }));
    const worker = new Worker("imports", async (job) => ({ doubled: (job.data as { n: number }).n * 2 }), {
      connection,
      prefix: m.env.env().BOUNDED_REDIS_PREFIX,
    });
    worker.on("completed", (_job, result) => settle.resolve(result));
    worker.on("failed", (_job, err) => settle.reject(err));
    try {
      await m.queues.queue("imports").add("cluster-test", { n: 21 });
      expect(await done).toEqual({ doubled: 42 });
    } finally {
      await worker.close();
      await connection.quit();
    }
  });

  it("BullMQ with a prefix without a hash tag is refused by the cluster (CROSSSLOT), which is what the env rule prevents", async () => {
    const untagged = "bounded-cluster-test-untagged";
    const q = new Queue("imports", { connection: m.client.redis(), prefix: untagged });
    try {
      await expect(q.add("cluster-test", { n: 1 })).rejects.toThrow(/CROSSSLOT/);
    } finally {
      await q.close();
    }
    expect(() =>
      m.env.parseEnv({
        BOUNDED_REDIS_CLUSTER: "1",
        REDIS_URL: `redis://127.0.0.1:${PORTS[0]}`,
        BOUNDED_REDIS_PREFIX: untagged,
      }),
    ).toThrow(
      /^BOUNDED_REDIS_PREFIX: with BOUNDED_REDIS_CLUSTER=1 the prefix must contain a hash tag.*BullMQ needs all keys of a queue in one cluster slot/,
    );
  });

  it("rate limiter: tryAcquire runs the token-bucket script, and the bucket is listed by listActiveScopes", async () => {
    const scope = m.buckets.scopeOf("orders", "cluster-tenant");
    expect(await m.limiter.tryAcquire(scope)).toEqual({ acquired: true });
    expect(await m.limiter.tryAcquire(scope, 9)).toEqual({ acquired: true });
    // 10 orders a minute: the bucket is empty, really counted. A whole bucket is asked for again, so
    // the refusal holds unless a whole scaled minute (60 ms at the tests' time scale) went by
    // between two calls, not one token's 6 ms.
    const refused = await m.limiter.tryAcquire(scope, 10);
    expect(refused.acquired).toBe(false);
    expect(await m.limiter.limiter().listActiveScopes()).toContain(scope);
    expect((await m.limiter.peekBucket(scope)).active).toBe(true);
    // The scope's own braces come after the prefix's tag: the bucket is in the prefix's slot.
    const client = m.client.redis();
    expect(await client.cluster("KEYSLOT", m.limiter.bucketKey(scope))).toBe(await client.cluster("KEYSLOT", PREFIX));
  });

  it("metrics: a worker's published snapshot is found and merged into the web's scrape", async () => {
    const quiet = { defaultMetrics: false, countStuck: async () => ({}), callAllowances: async () => [] };
    const worker = m.metrics.createMetrics(new Registry(), quiet);
    worker.jobsFinished.inc({ kind: "csv_import", status: "completed" }, 7);
    const stop = m.publish.startMetricsPublisher("workers", { metrics: worker, intervalMs: 60_000 });
    try {
      await waitFor(async () => (await m.publish.readWorkerSnapshots()).length === 1, {
        what: "the metrics snapshot",
        timeoutMs: 20_000,
      });
      const web = m.metrics.createMetrics(new Registry(), quiet);
      web.jobsFinished.inc({ kind: "csv_import", status: "completed" }, 1);
      const { text } = await m.publish.renderMetrics({ metrics: web });
      expect(text).toMatch(
        /^bounded_jobs_finished_total\{kind="csv_import",status="completed",process="workers-[^"]+"\} 7$/m,
      );
      expect(text).toMatch(/^bounded_jobs_finished_total\{kind="csv_import",status="completed",process="web"\} 1$/m);
    } finally {
      await stop();
    }
    expect(await m.publish.readWorkerSnapshots()).toEqual([]);
  });

  it("budgets: a worker's publication is listed by listWorkerBudgets", async () => {
    const connection = m.client.createRedis("worker");
    const publisher = await m.runtime.startBudgetPublisher({
      queues: ["imports"],
      concurrency: 3,
      redis: connection,
      host: "cluster-host",
      pid: 4242,
    });
    try {
      const listed = await m.runtime.listWorkerBudgets();
      expect(listed.map((w) => [w.host, w.pid, w.concurrency])).toEqual([["cluster-host", 4242, 3]]);
    } finally {
      await publisher.stop();
      await connection.quit();
    }
  });

  it("health: a worker's presence is announced and counted on the cluster (its two keys in one slot)", async () => {
    const id = "cluster-host:4242";
    await m.presence.announcePresence(m.client.redis(), id, {
      host: "cluster-host",
      pid: 4242,
      queues: [],
      concurrency: 1,
    });
    try {
      expect(await m.health.checkHealth()).toMatchObject({ redis: "ok", workers: 1 });
    } finally {
      await m.presence.withdrawPresence(m.client.redis(), id);
    }
    expect(await m.health.checkHealth()).toMatchObject({ redis: "ok", workers: 0 });
  });

  it("login: failed sign-ins are counted in one MULTI on the cluster, and the limit throttles", async () => {
    // Braces in a username come after the prefix's tag: both counters still share one slot.
    const username = `{nobody}-${Date.now()}`;
    const address = "203.0.113.77";
    for (let i = 0; i < m.login.LOGIN_LIMITS.perUser; i++) {
      expect(await m.login.login({ username, password: "wrong password" }, address)).toEqual({ type: "invalid" });
    }
    const client = m.client.redis();
    const userKey = m.client.key("login-failures", "user", username);
    const addressKey = m.client.key("login-failures", "address", address);
    expect(await client.mget(userKey, addressKey)).toEqual([
      String(m.login.LOGIN_LIMITS.perUser),
      String(m.login.LOGIN_LIMITS.perUser),
    ]);
    expect(await client.ttl(userKey)).toBeGreaterThan(0);
    const throttled = await m.login.login({ username, password: "wrong password" }, address);
    expect(throttled.type).toBe("throttled");
    await client.del(userKey, addressKey);
  });

  it("the keys that stay (the BullMQ queue's) are all in the one slot of the prefix's hash tag", async () => {
    const client = m.client.redis();
    const keys = new Set<string>();
    for await (const batch of m.client.scanKeys(client, `${PREFIX}*`, 100)) for (const k of batch) keys.add(k);
    expect([...keys].some((k) => k.startsWith(`${PREFIX}:imports:`))).toBe(true);
    const slots = new Set(await Promise.all([...keys].map((k) => client.cluster("KEYSLOT", k))));
    expect([...slots]).toEqual([await client.cluster("KEYSLOT", PREFIX)]);
  });
});
