import { readdir } from "node:fs/promises";
import path from "node:path";
import { db } from "@/lib/db/client";
import { QUEUE_NAMES } from "@/lib/catalog/catalog";
import { livePresences } from "@/lib/queues/presence";
import { redis } from "@/lib/redis/client";

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

export async function checkHealth(): Promise<Health> {
  const [dbOk, workers] = await Promise.all([
    checkDatabase().then((c) => c.ok),
    within(2000, livePresences()).then(
      (p) => p.length,
      () => null,
    ),
  ]);
  return {
    ok: dbOk && workers !== null,
    db: dbOk ? "ok" : "down",
    redis: workers !== null ? "ok" : "down",
    workers: workers ?? 0,
  };
}

/**
 * Readiness (`GET /api/readyz`): may this process take traffic? Each check is a small function
 * with its own time limit, so the answer comes within `READY_CHECK_TIMEOUT_MS` plus a little even
 * when PostgreSQL or Redis hangs. What a check reports is public: fixed words and counts, never a
 * host, a user or a driver's error text.
 */

/** Every check gives up after this long; they run at once, so the whole answer stays under 2 s. */
export const READY_CHECK_TIMEOUT_MS = 1_500;
/** The migration comparison changes only with a deploy: read at most this often. */
const MIGRATIONS_CACHE_MS = 10_000;

export type Check = { ok: true; detail?: string } | { ok: false; error: string };
export type ReadinessCheck = "database" | "redis" | "migrations" | "workers";
export interface Readiness {
  ok: boolean;
  checks: Record<ReadinessCheck, Check>;
  /** The checks that failed, in the order above. */
  failed: ReadinessCheck[];
}

/** Runs one check under the time limit; a throw or a timeout is a failed check with `failure`'s words. */
async function limited(failure: string, run: () => Promise<Check>, ms = READY_CHECK_TIMEOUT_MS): Promise<Check> {
  try {
    return await within(ms, run());
  } catch (err) {
    return {
      ok: false,
      error: err instanceof Error && err.message === "timeout" ? `${failure}: no answer within ${ms} ms` : failure,
    };
  }
}

export function checkDatabase(): Promise<Check> {
  return limited("PostgreSQL is not reachable", async () => {
    await db().$queryRaw`select 1`;
    return { ok: true };
  });
}

export function checkRedis(): Promise<Check> {
  return limited("Redis is not reachable", async () => {
    await redis().ping();
    return { ok: true };
  });
}

/** The migration folders this build ships (prisma/migrations, next to the running app). */
async function migrationFolders(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  return entries.filter((e) => e.isDirectory()).map((e) => e.name);
}

let migrationsCache: { at: number; check: Check } | undefined;

/**
 * Every folder of prisma/migrations is recorded as applied in `_prisma_migrations` (finished,
 * not rolled back). A result is kept `MIGRATIONS_CACHE_MS`; checksums are `npm run db:status`'s
 * business, not a probe's.
 */
export function checkMigrations(dir = path.join(process.cwd(), "prisma", "migrations")): Promise<Check> {
  if (migrationsCache && Date.now() - migrationsCache.at < MIGRATIONS_CACHE_MS)
    return Promise.resolve(migrationsCache.check);
  return limited("the migration history cannot be read", async () => {
    const [folders, rows] = await Promise.all([
      migrationFolders(dir),
      db().$queryRaw<{ migration_name: string }[]>`
        SELECT migration_name FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`,
    ]);
    const applied = new Set(rows.map((r) => r.migration_name));
    const pending = folders.filter((f) => !applied.has(f)).sort();
    const check: Check =
      pending.length === 0
        ? { ok: true, detail: `${folders.length} applied` }
        : { ok: false, error: `${pending.length} pending (${pending.join(", ")})` };
    migrationsCache = { at: Date.now(), check };
    return check;
  });
}

/** Queues of the catalog with no live worker process consuming them; every one needs at least one. */
export function checkWorkers(queues: readonly string[] = QUEUE_NAMES): Promise<Check> {
  return limited("worker presence cannot be read (Redis)", async () => {
    const presences = await livePresences();
    const served = new Set(presences.flatMap((p) => p.queues));
    const missing = queues.filter((q) => !served.has(q));
    return missing.length === 0
      ? { ok: true, detail: `${presences.length} worker process(es)` }
      : { ok: false, error: `no live worker for ${missing.join(", ")}` };
  });
}

export async function checkReadiness(): Promise<Readiness> {
  const [database, redisCheck, migrations, workers] = await Promise.all([
    checkDatabase(),
    checkRedis(),
    checkMigrations(),
    checkWorkers(),
  ]);
  const checks: Record<ReadinessCheck, Check> = { database, redis: redisCheck, migrations, workers };
  const failed = (Object.keys(checks) as ReadinessCheck[]).filter((name) => !checks[name].ok);
  return { ok: failed.length === 0, checks, failed };
}

/** Forgets the cached migration comparison (tests, and a process that just migrated). */
export function forgetMigrationCheck(): void {
  migrationsCache = undefined;
}
