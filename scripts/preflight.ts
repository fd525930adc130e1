import { existsSync } from "node:fs";
import { resolve } from "node:path";
import pg from "pg";
import { Redis } from "ioredis";
import { BudgetConfigError, validateBudgets } from "@/lib/budgets/budgets";
import { env, EnvError, type Env } from "@/lib/env";
import { ReservationPolicyError } from "@/lib/catalog/generation-policy";
import { validateReservationPolicy } from "@/lib/quota/settings";
import { modelRouting } from "@/lib/model-providers";

/** Loads `.env` from the repository root into the environment, when there is one. */
export function loadDotEnv(root: string): void {
  const file = resolve(root, ".env");
  if (existsSync(file)) process.loadEnvFile(file);
}

function hostOf(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || (u.protocol.startsWith("redis") ? 6379 : 5432)}`;
}

/**
 * The settings read later, checked now: the web resolves budgets too (for new jobs and the pages),
 * so a bad override stops it here, not at the first upload; every mistake in the model providers
 * and their routes is a line of its own.
 */
function checkConfiguration(e: Env): void {
  try {
    validateBudgets(e);
    validateReservationPolicy(e);
    modelRouting();
  } catch (err) {
    if (err instanceof BudgetConfigError || err instanceof ReservationPolicyError || err instanceof EnvError)
      fail(err.message);
    throw err;
  }
}

/**
 * Start-up checks that stop with one line naming the variable and what to do: the environment
 * parses, PostgreSQL answers, Redis answers.
 */
export async function preflight(needs: { postgres: boolean; redis: boolean }): Promise<Env> {
  let e: Env;
  try {
    e = env();
  } catch (err) {
    if (err instanceof EnvError) fail(err.message);
    throw err;
  }
  checkConfiguration(e);
  if (needs.postgres) {
    // The server, not the database: the migration step creates the database when it is missing.
    const url = new URL(e.DATABASE_URL);
    url.pathname = "/postgres";
    const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 3000 });
    try {
      await client.connect();
      await client.query("select 1");
    } catch (err) {
      fail(
        `Cannot reach PostgreSQL at ${hostOf(e.DATABASE_URL)} (DATABASE_URL): ${(err as Error).message || "no answer"}. Start PostgreSQL or fix DATABASE_URL.`,
      );
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  if (needs.redis) {
    const client = new Redis(e.REDIS_URL, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      connectTimeout: 3000,
      retryStrategy: () => null,
    });
    // ioredis reports the cause (e.g. ECONNREFUSED) as an event and rejects with "Connection is closed".
    let cause: Error | undefined;
    client.on("error", (err: Error) => (cause ??= err));
    let clusterNode = false;
    let clusterState: string | undefined;
    try {
      await client.connect();
      await client.ping();
      // INFO and CLUSTER INFO are what BullMQ and the cluster client send first anyway.
      clusterNode = /^cluster_enabled:1/m.test(await client.info("cluster"));
      if (clusterNode) clusterState = /^cluster_state:(\w+)/m.exec(String(await client.call("CLUSTER", "INFO")))?.[1];
    } catch (err) {
      const why = (cause ?? (err as Error)).message.replace(/\.$/, "") || "no answer";
      fail(`Cannot reach Redis at ${hostOf(e.REDIS_URL)} (REDIS_URL): ${why}. Start Redis or fix REDIS_URL.`);
    } finally {
      client.disconnect();
    }
    // A mismatch fails later and obscurely: a plain client gets MOVED for most keys of a cluster
    // node, and a cluster client keeps retrying against a server that has no slots to give.
    if (clusterNode && !e.BOUNDED_REDIS_CLUSTER) {
      fail(
        `Redis at ${hostOf(e.REDIS_URL)} (REDIS_URL) is a Redis Cluster node but BOUNDED_REDIS_CLUSTER=0. Set BOUNDED_REDIS_CLUSTER=1 and a hash-tagged BOUNDED_REDIS_PREFIX such as {bounded}.`,
      );
    }
    if (!clusterNode && e.BOUNDED_REDIS_CLUSTER) {
      fail(
        `Redis at ${hostOf(e.REDIS_URL)} (REDIS_URL) is not a Redis Cluster node but BOUNDED_REDIS_CLUSTER=1. Point REDIS_URL at a cluster node or set BOUNDED_REDIS_CLUSTER=0.`,
      );
    }
    if (clusterNode && clusterState !== "ok") {
      fail(
        `The Redis Cluster of ${hostOf(e.REDIS_URL)} (REDIS_URL) is not serving (cluster_state:${clusterState ?? "unknown"}). Repair the cluster (redis-cli --cluster check) and start again.`,
      );
    }
  }
  return e;
}

export function fail(line: string): never {
  process.stderr.write(`bounded: ${line}\n`);
  process.exit(1);
}
