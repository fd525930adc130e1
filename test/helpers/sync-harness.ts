import { randomUUID } from "node:crypto";
import net from "node:net";
import { vi } from "vitest";
import type { Worker } from "bullmq";
import { waitFor } from "./wait";

/**
 * What a marketplace-sync test needs, against the real database, Redis and BullMQ: the
 * marketplace simulator on a free port, a Redis prefix of its own (no other worker takes its
 * jobs), a sync budget no test comes near unless it sets one, and the modules — imported only
 * after the environment is stubbed, because it is parsed once, on first use.
 */
export async function startSyncHarness(options: {
  timeScale: number;
  pages: number;
  budget?: { softS: number; hardS: number };
}) {
  const prefix = `bounded-test-sync-${randomUUID().slice(0, 8)}`;
  vi.stubEnv("BOUNDED_REDIS_PREFIX", prefix);
  if (process.env.SYNC_DEBUG) vi.stubEnv("LOG_LEVEL", "debug");
  vi.stubEnv("BOUNDED_TIME_SCALE", String(options.timeScale));
  vi.stubEnv("BOUNDED_BUDGET_MARKETPLACE_SYNC_SOFT_S", String(options.budget?.softS ?? 600_000));
  vi.stubEnv("BOUNDED_BUDGET_MARKETPLACE_SYNC_HARD_S", String(options.budget?.hardS ?? 900_000));
  // The environment is parsed once, on first use: the simulator's address must be in it before.
  const port = await freePort();
  vi.stubEnv("MARKETPLACE_BASE_URL", `http://127.0.0.1:${port}/marketplace`);
  const { startSimulators } = await import("@/workers/simulators/server");
  const sim = await startSimulators({
    port,
    marketplace: { pages: options.pages, timeScale: options.timeScale },
    model: { errorRate: 0, timeScale: options.timeScale },
  });
  const m = {
    bullmq: await import("bullmq"),
    db: await import("@/lib/db/client"),
    env: await import("@/lib/env"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    log: await import("@/lib/log"),
    syncs: await import("@/lib/syncs/create-sync"),
    stuck: await import("@/lib/reports/stuck"),
    reaper: await import("@/lib/runs/reaper"),
    processor: await import("@/workers/queue-processor"),
    reschedule: await import("@/lib/runs/reschedule"),
    catalog: await import("@/workers/catalog"),
    tenants: await import("./tenants"),
  };
  const tenants: string[] = [];
  const workers: Worker[] = [];
  const connections: { quit(): Promise<unknown> }[] = [];
  const row = (id: string) => m.db.db().job.findUniqueOrThrow({ where: { id } });
  return {
    m,
    sim,
    prefix,
    tenant(label: string): string {
      const slug = m.tenants.uniqueTenantSlug(label);
      tenants.push(slug);
      return slug;
    },
    row,
    /** A real BullMQ worker on the sync queue, in this process, with the production wrapper and options. */
    startWorker(concurrency = 2): Worker {
      const shutdown = new AbortController();
      const connection = m.redis.createRedis("worker");
      connections.push(connection);
      const w = new m.bullmq.Worker(
        "marketplace-sync",
        m.processor.queueProcessor("marketplace-sync", {
          processors: m.catalog.PROCESSORS,
          shutdown: shutdown.signal,
          log: m.log.logger("test"),
        }),
        {
          connection,
          prefix,
          concurrency,
          ...m.reschedule.rescheduleWorkerOptions("marketplace-sync"),
        },
      );
      w.on("error", () => undefined);
      workers.push(w);
      return w;
    },
    waitFor<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 30_000): Promise<T> {
      return waitFor(probe, { what, timeoutMs }) as Promise<T>;
    },
    /** Closes every worker started so far (their jobs stay in the queue as they are). */
    async stopWorkers() {
      await Promise.all(workers.splice(0).map((w) => w.close(true)));
      await Promise.all(connections.splice(0).map((c) => c.quit().catch(() => undefined)));
    },
    async close() {
      await this.stopWorkers();
      // The rollup keeps tenants by slug (history outlives a tenant): remove the test's own.
      await m.db.db().rateLimitRollup.deleteMany({ where: { tenant: { in: tenants } } });
      for (const slug of tenants.splice(0)) await m.tenants.deleteTenant(slug);
      const redis = m.redis.redis();
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length) await redis.del(...keys);
      await m.queues.closeQueues();
      await m.redis.closeRedis();
      await m.db.closeDb();
      await sim.close();
    },
  };
}

/** A TCP port nobody listens on right now. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
