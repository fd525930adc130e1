import { db } from "@/lib/db/client";
import { redis, key } from "@/lib/redis/client";

export interface Health {
  ok: boolean;
  db: "ok" | "down";
  redis: "ok" | "down";
  /** Worker processes that sent a heartbeat recently. */
  workers: number;
}

function within<T>(ms: number, p: Promise<T>): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error("timeout")), ms))]);
}

export async function checkHealth(): Promise<Health> {
  const [dbOk, workers] = await Promise.all([
    within(2000, db().$queryRaw`select 1`).then(() => true, () => false),
    within(2000, redis().keys(key("workers", "*"))).then((k) => k.length, () => null),
  ]);
  return { ok: dbOk && workers !== null, db: dbOk ? "ok" : "down", redis: workers !== null ? "ok" : "down", workers: workers ?? 0 };
}
