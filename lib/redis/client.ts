import { Cluster, Redis } from "ioredis";
import { env } from "@/lib/env";

/** A connection to Redis: one server, or a Redis Cluster when BOUNDED_REDIS_CLUSTER=1. */
export type RedisClient = Redis | Cluster;

const holder = globalThis as unknown as { __boundedRedis?: RedisClient };

/** The longest a producer's command waits for its answer: a web request is answered 503 after it. */
export const PRODUCER_COMMAND_TIMEOUT_MS = 2_000;

/**
 * A new connection. Workers wait for Redis (`maxRetriesPerRequest: null`, required by BullMQ
 * workers); producers such as the web fail fast so a request never hangs on a dead Redis: a
 * command gets no second try after a failed reconnect, and none waits longer than
 * `PRODUCER_COMMAND_TIMEOUT_MS` for its answer (queued while disconnected, or sent to a server that
 * does not answer). Those errors read as "Redis is not reachable" (lib/dependencies).
 *
 * With BOUNDED_REDIS_CLUSTER=1, REDIS_URL is only the seed: the client asks it for the cluster's
 * nodes and connects to each with the URL's credentials and TLS and the same per-connection
 * options (BullMQ reads `maxRetriesPerRequest` from a cluster's `redisOptions`).
 */
export function createRedis(kind: "producer" | "worker", options: { enableOfflineQueue?: boolean } = {}): RedisClient {
  const e = env();
  const enableOfflineQueue = options.enableOfflineQueue ?? kind === "worker";
  const perConnection =
    kind === "worker"
      ? { maxRetriesPerRequest: null, connectTimeout: 2_000 }
      : { maxRetriesPerRequest: 1, connectTimeout: 2_000, commandTimeout: PRODUCER_COMMAND_TIMEOUT_MS };
  if (!e.BOUNDED_REDIS_CLUSTER)
    return new Redis(e.REDIS_URL, { ...perConnection, enableOfflineQueue, lazyConnect: false });
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
  if (!holder.__boundedRedis) {
    const client = createRedis("producer", { enableOfflineQueue: true });
    // While Redis is down every reconnect attempt emits an error; each command already fails with
    // its own (answered as a 503), so the event is not logged again for every attempt.
    client.on("error", () => undefined);
    holder.__boundedRedis = client;
  }
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
export async function* scanKeys(
  client: RedisClient,
  pattern: string,
  count: number,
): AsyncGenerator<string[], void, undefined> {
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
