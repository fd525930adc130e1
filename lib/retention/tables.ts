import { db, Prisma } from "@/lib/db/client";
import { type ClassRun, pacedOutOfTime, type Removed, utc } from "./pass";
import { classOf, type RetentionClassName } from "./policy";

/** What of a table's rows is never pruned, whatever its age. */
const KEPT: Record<string, Prisma.Sql> = {
  WebhookDelivery: Prisma.sql`AND status <> 'pending'`,
  LateRelease: Prisma.sql`AND (resolution <> 'debt' OR "debtSettledAt" IS NOT NULL)`,
};

/** A class of tables each aged by a column of its own: oldest rows first, a batch at a time. */
export async function pruneTables(
  name: Exclude<RetentionClassName, "job_detail" | "jobs" | "tenant_results">,
  run: ClassRun,
): Promise<Removed> {
  const removed: Record<string, number> = {};
  let behind = false;
  for (const { table, ageColumn } of classOf(name).tables) {
    const from = Prisma.raw(`"${table}"`);
    const age = Prisma.raw(`"${ageColumn}"`);
    const where = Prisma.sql`${age} < ${utc(run.cutoff)} ${KEPT[table] ?? Prisma.empty}`;
    if (run.dryRun) {
      const [row] = await db().$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM ${from} WHERE ${where}`;
      removed[table] = Number(row!.n);
      continue;
    }
    removed[table] = 0;
    for (;;) {
      const n = await db().$transaction(async (tx) => {
        if (name === "audit") await tx.$executeRaw`SELECT set_config('bounded.retention', 'audit', true)`;
        return tx.$executeRaw`
          DELETE FROM ${from} WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM ${from} WHERE ${where} ORDER BY ${age} LIMIT ${run.batch}))`;
      });
      removed[table] += n;
      if (n < run.batch) break;
      if (await pacedOutOfTime(run)) {
        behind = true;
        break;
      }
    }
  }
  return { removed, behind };
}
