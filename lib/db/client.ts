import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "@/generated/prisma/client";
import { env } from "@/lib/env";

export { Prisma } from "@/generated/prisma/client";
export type { PrismaClient } from "@/generated/prisma/client";

const holder = globalThis as unknown as { __boundedPrisma?: PrismaClient };

/** The one Prisma client of this process (kept on globalThis so dev reloads don't multiply pools). */
export function db(): PrismaClient {
  holder.__boundedPrisma ??= new PrismaClient({
    adapter: new PrismaPg({ connectionString: env().DATABASE_URL, max: 10 }),
  });
  return holder.__boundedPrisma;
}

export async function closeDb(): Promise<void> {
  const client = holder.__boundedPrisma;
  holder.__boundedPrisma = undefined;
  await client?.$disconnect();
}
