import { Redis, type RedisOptions } from "ioredis";
import { env } from "@/lib/env";

const holder = globalThis as unknown as { __boundedRedis?: Redis };

/**
 * A new connection. Workers wait for Redis (`maxRetriesPerRequest: null`, required by BullMQ
 * workers); producers such as the web fail fast so a request never hangs on a dead Redis.
 */
export function createRedis(kind: "producer" | "worker", options: RedisOptions = {}): Redis {
  return new Redis(env().REDIS_URL, {
    maxRetriesPerRequest: kind === "worker" ? null : 1,
    enableOfflineQueue: kind === "worker",
    connectTimeout: 2_000,
    lazyConnect: false,
    ...options,
  });
}

/** The shared producer connection of this process (web requests, enqueueing, health). */
export function redis(): Redis {
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
