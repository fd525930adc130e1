import { Cluster, Redis } from "ioredis";
import { env } from "@/lib/env";

/** A connection to Redis: one server, or a Redis Cluster when BOUNDED_REDIS_CLUSTER=1. */
export type RedisClient = Redis | Cluster;

const holder = globalThis as unknown as { __boundedRedis?: RedisClient };

/**
 * A new connection. Workers wait for Redis (`maxRetriesPerRequest: null`, required by BullMQ
 * workers); producers such as the web fail fast so a request never hangs on a dead Redis.
 *
 * With BOUNDED_REDIS_CLUSTER=1, REDIS_URL is only the seed: the client asks it for the cluster's
 * nodes and connects to each with the URL's credentials and TLS and the same per-connection
 * options (BullMQ reads `maxRetriesPerRequest` from a cluster's `redisOptions`).
 */
export function createRedis(kind: "producer" | "worker", options: { enableOfflineQueue?: boolean } = {}): RedisClient {
  const e = env();
  const enableOfflineQueue = options.enableOfflineQueue ?? kind === "worker";
  const perConnection = { maxRetriesPerRequest: kind === "worker" ? null : 1, connectTimeout: 2_000 };
  if (!e.BOUNDED_REDIS_CLUSTER) return new Redis(e.REDIS_URL, { ...perConnection, enableOfflineQueue, lazyConnect: false });
  const seed = new URL(e.REDIS_URL);
  return new Cluster([{ host: seed.hostname.replace(/^\[|\]$/g, ""), port: Number(seed.port || 6379) }], {
    enableOfflineQueue,
    lazyConnect: false,
    redisOptions: {
      ...perConnection,
      username: seed.username ? decodeURIComponent(seed.username) : undefined,
      password: seed.password ? decodeURIComponent(seed.password) : undefined,
      tls: seed.protocol === "rediss:" ? {} : undefined,
    },
  });
}

/** The shared producer connection of this process (web requests, enqueueing, health). */
export function redis(): RedisClient {
  holder.__boundedRedis ??= createRedis("producer", { enableOfflineQueue: true });
  return holder.__boundedRedis;
}

export async function closeRedis(): Promise<void> {
  const client = holder.__boundedRedis;
  holder.__boundedRedis = undefined;
  if (client) await client.quit().catch(() => client.disconnect());
}

/** A Redis key under the configured prefix. */
export function key(...parts: string[]): string {
  return [env().BOUNDED_REDIS_PREFIX, ...parts].join(":");
}

/**
 * The keys matching `pattern` (a SCAN MATCH glob), one batch per SCAN call, so a caller can put a
 * timeout on each call and stop early. SCAN walks the keyspace of the one server it is sent to:
 * a Cluster client would send it to a single node, so on a Cluster every master is scanned in
 * turn. As with SCAN itself, a key may come more than once.
 */
export async function* scanKeys(client: RedisClient, pattern: string, count: number): AsyncGenerator<string[], void, undefined> {
  for (const server of await serversOf(client)) {
    let cursor = "0";
    do {
      const [next, keys] = await server.scan(cursor, "MATCH", pattern, "COUNT", count);
      cursor = next;
      yield keys;
    } while (cursor !== "0");
  }
}

async function serversOf(client: RedisClient): Promise<Redis[]> {
  if (!(client instanceof Cluster)) return [client];
  // A cluster client learns its nodes when it connects; before that the list is empty, which
  // would read as "no keys". The command waits in the offline queue until the nodes are known.
  if (client.status !== "ready") await client.ping();
  const masters = client.nodes("master");
  if (masters.length === 0) throw new Error("the Redis Cluster client knows no master node");
  return masters;
}
