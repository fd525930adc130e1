import { db } from "@/lib/db/client";
import { redis, key, scanKeys } from "@/lib/redis/client";

export interface Health {
  ok: boolean;
  db: "ok" | "down";
  redis: "ok" | "down";
  /** Worker processes that sent a heartbeat recently. */
  workers: number;
}

function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error("timeout")), ms)));
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** SCAN, never KEYS: this route is public and polled, and KEYS blocks Redis for the whole keyspace. */
async function countKeys(pattern: string): Promise<number> {
  let n = 0;
  for await (const keys of scanKeys(redis(), pattern, 500)) n += keys.length;
  return n;
}

export async function checkHealth(): Promise<Health> {
  const [dbOk, workers] = await Promise.all([
    within(2000, db().$queryRaw`select 1`).then(() => true, () => false),
    within(2000, countKeys(key("workers", "*"))).then((n) => n, () => null),
  ]);
  return { ok: dbOk && workers !== null, db: dbOk ? "ok" : "down", redis: workers !== null ? "ok" : "down", workers: workers ?? 0 };
}
