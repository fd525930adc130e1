import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "@/generated/prisma/client";
import { env } from "@/lib/env";

export { Prisma } from "@/generated/prisma/client";
export type { PrismaClient } from "@/generated/prisma/client";

const holder = globalThis as unknown as { __boundedPrisma?: PrismaClient };

/** The one Prisma client of this process (kept on globalThis so dev reloads don't multiply pools). */
export function db(): PrismaClient {
  // A worker runs up to (queues × concurrency) jobs at once, each with item transactions, plus
  // heartbeats and the reaper: the pool has room for all of them, and waits are bounded.
  holder.__boundedPrisma ??= new PrismaClient({
    adapter: new PrismaPg({ connectionString: env().DATABASE_URL, max: 30, connectionTimeoutMillis: 10_000, keepAlive: true }),
    transactionOptions: { maxWait: 10_000, timeout: 30_000 },
  });
  return holder.__boundedPrisma;
}

export async function closeDb(): Promise<void> {
  const client = holder.__boundedPrisma;
  holder.__boundedPrisma = undefined;
  await client?.$disconnect();
}
