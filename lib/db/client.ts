import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "@/generated/prisma/client";
import { env } from "@/lib/env";

export { Prisma } from "@/generated/prisma/client";
export type { PrismaClient } from "@/generated/prisma/client";

const holder = globalThis as unknown as { __boundedPrisma?: PrismaClient };

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

/** The one Prisma client of this process (kept on globalThis so dev reloads don't multiply pools). */
export function db(): PrismaClient {
  // A worker runs up to (queues × concurrency) jobs at once, each with item transactions, plus
  // heartbeats and the reaper: the pool has room for all of them, and waits are bounded.
  holder.__boundedPrisma ??= (() => {
    const { maxWait, ...timeouts } = poolTimeouts();
    return new PrismaClient({
      adapter: new PrismaPg({ connectionString: env().DATABASE_URL, max: 30, keepAlive: true, ...timeouts }),
      transactionOptions: { maxWait, timeout: 30_000 },
    });
  })();
  return holder.__boundedPrisma;
}

export async function closeDb(): Promise<void> {
  const client = holder.__boundedPrisma;
  holder.__boundedPrisma = undefined;
  await client?.$disconnect();
}
