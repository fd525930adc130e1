import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient } from "@/generated/prisma/client";
import { env } from "@/lib/env";

export { Prisma } from "@/generated/prisma/client";
export type { PrismaClient } from "@/generated/prisma/client";

const holder = globalThis as unknown as { __boundedPrisma?: PrismaClient; __boundedPool?: pg.Pool };

/**
 * How long this process waits for PostgreSQL. The web answers a person who is waiting: a
 * connection (or a pooled one) it cannot get within 2 s, or a query without an answer in 10 s,
 * fails the request at once with a 503 (lib/dependencies) instead of hanging it. Workers and
 * scripts are patient: a job waits out an outage and goes on, so their calls may take longer.
 * Next.js sets NEXT_RUNTIME in its server processes, and nowhere else.
 */
export function poolTimeouts(web = Boolean(process.env.NEXT_RUNTIME)) {
  return web
    ? { connectionTimeoutMillis: 2_000, query_timeout: 10_000, statement_timeout: 10_000, maxWait: 2_000 }
    : { connectionTimeoutMillis: 10_000, query_timeout: undefined, statement_timeout: undefined, maxWait: 10_000 };
}

/**
 * The one connection pool of this process, under Prisma's client (kept on globalThis so dev
 * reloads don't multiply pools). A worker runs up to (queues × concurrency) jobs at once, each
 * with item transactions, plus heartbeats and the reaper: the pool has room for all of them, and
 * waits are bounded.
 */
function pool(): pg.Pool {
  holder.__boundedPool ??= (() => {
    const { maxWait: _, ...timeouts } = poolTimeouts();
    const connections = new pg.Pool({ connectionString: env().DATABASE_URL, max: 30, keepAlive: true, ...timeouts });
    // An idle connection that PostgreSQL closes (a restart) is dropped from the pool; the next
    // statement opens another, and one that fails says so to its caller.
    connections.on("error", () => undefined);
    return connections;
  })();
  return holder.__boundedPool;
}

/** The one Prisma client of this process, on the pool. */
export function db(): PrismaClient {
  holder.__boundedPrisma ??= new PrismaClient({
    adapter: new PrismaPg(pool()),
    transactionOptions: { maxWait: poolTimeouts().maxWait, timeout: 30_000 },
  });
  return holder.__boundedPrisma;
}

/**
 * A statement sent on the same pool without Prisma's client: for the few every job runs (its
 * start and its finish), where the client's query handling costs the worker more CPU than the
 * statement (docs/benchmarks.md, "Where the time goes"). Its columns come back as node-postgres
 * reads them: int4, float8, bool, text, uuid and json(b) as Prisma's raw queries would, but int8
 * and numeric as strings and a timestamp without time zone as local time — select only the first kind.
 */
export async function poolQuery<T>(text: string, values: unknown[]): Promise<T[]> {
  return (await pool().query(text, values)).rows as T[];
}

export async function closeDb(): Promise<void> {
  const client = holder.__boundedPrisma;
  const connections = holder.__boundedPool;
  holder.__boundedPrisma = undefined;
  holder.__boundedPool = undefined;
  await client?.$disconnect();
  await connections?.end();
}
