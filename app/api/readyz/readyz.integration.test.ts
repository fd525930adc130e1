import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startProxy } from "@/test/helpers/cuttable-proxy";
import { waitFor } from "@/test/helpers/wait";

/**
 * Readiness against the real services, with Redis reached through a proxy the test can cut: the
 * probe names redis when it is down or hangs (answering within 2 s either way), and is ready
 * again once Redis is back.
 */
const proxy = await startProxy(Number(new URL(process.env.REDIS_URL ?? "redis://127.0.0.1:6379").port || 6379));
process.env.REDIS_URL = `redis://127.0.0.1:${proxy.port}`;

const { closeDb, db } = await import("@/lib/db/client");
const { closeRedis, redis } = await import("@/lib/redis/client");
const { QUEUE_NAMES } = await import("@/lib/catalog/catalog");
const { checkMigrations, checkWorkers, forgetMigrationCheck } = await import("@/lib/reports/health");
const readyz = await import("./route");

const { announcePresence, withdrawPresence } = await import("@/lib/queues/presence");

const presence = "readyz-test:1";

async function probe(): Promise<{
  status: number;
  body: { status: string; failed?: string[]; checks: Record<string, { ok: boolean; error?: string }> };
}> {
  const response = await readyz.GET(new Request("http://localhost/api/readyz"), {} as never);
  return { status: response.status, body: await response.json() };
}

/** The first 200 once Redis is back: the client reconnects on its own schedule. */
const readyAgain = () =>
  waitFor(
    async () => {
      const answer = await probe();
      return answer.status === 200 && answer;
    },
    { what: "readiness once Redis is back", timeoutMs: 10_000, intervalMs: 50 },
  );

beforeAll(async () => {
  // A cold client's first query loads Prisma's query compiler (over a second here): not what is probed.
  await db().$queryRaw`select 1`;
  // A live worker for every queue of the catalog, as workers/main.ts announces itself.
  await announcePresence(
    redis(),
    presence,
    { host: "readyz-test", pid: 1, queues: QUEUE_NAMES, concurrency: 1 },
    60_000,
  );
});

afterAll(async () => {
  await proxy.up();
  await withdrawPresence(redis(), presence).catch(() => undefined);
  await closeRedis();
  await closeDb();
  await proxy.close();
});

describe("GET /api/readyz", () => {
  it("is ready with PostgreSQL, Redis, every migration applied and a worker per queue", async () => {
    const { status, body } = await probe();
    expect(body.failed).toBeUndefined();
    expect(status).toBe(200);
    expect(body.status).toBe("ready");
    expect(Object.keys(body.checks).sort()).toEqual(["database", "migrations", "redis", "workers"]);
  });

  it("answers 503 naming redis when Redis is unreachable, and 200 again once it is back", async () => {
    await proxy.down();
    const down = await probe();
    expect(down.status).toBe(503);
    expect(down.body.failed).toContain("redis");
    expect(down.body.checks.database!.ok).toBe(true);
    // Public: fixed words, no address of the server.
    expect(JSON.stringify(down.body)).not.toContain(String(proxy.port));

    await proxy.up();
    expect((await readyAgain()).body.status).toBe("ready");
  });

  it("answers within 2 s naming redis when Redis accepts connections but never answers", async () => {
    proxy.hang();
    const started = performance.now();
    const hung = await probe();
    const tookMs = performance.now() - started;
    await proxy.up();
    expect(hung.status).toBe(503);
    expect(hung.body.failed).toContain("redis");
    expect(hung.body.checks.redis!.error).toMatch(/no answer within/);
    expect(tookMs).toBeLessThan(2_000);
    await readyAgain();
  });

  it("names a queue without a live worker", async () => {
    const served = QUEUE_NAMES.filter((q) => q !== "sweeps");
    expect(await checkWorkers(QUEUE_NAMES)).toEqual({ ok: true, detail: expect.any(String) });
    await announcePresence(redis(), presence, { host: "readyz-test", pid: 1, queues: served, concurrency: 1 }, 60_000);
    expect(await checkWorkers(QUEUE_NAMES)).toEqual({ ok: false, error: "no live worker for sweeps" });
    await announcePresence(
      redis(),
      presence,
      { host: "readyz-test", pid: 1, queues: QUEUE_NAMES, concurrency: 1 },
      60_000,
    );
  });

  it("names pending migrations: a folder the database has not applied", async () => {
    const { mkdtemp, mkdir, rm } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const path = await import("node:path");
    const dir = await mkdtemp(path.join(tmpdir(), "readyz-migrations-"));
    try {
      await mkdir(path.join(dir, "29990101000000_future"));
      forgetMigrationCheck();
      expect(await checkMigrations(dir)).toEqual({ ok: false, error: "1 pending (29990101000000_future)" });
    } finally {
      forgetMigrationCheck();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
