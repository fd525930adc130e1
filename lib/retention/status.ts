import { db, Prisma } from "@/lib/db/client";
import { env, type Env } from "@/lib/env";
import { OPERATOR_STATUSES } from "@/lib/diagnosis/resume-policy";
import { cutoffOf, RETENTION_CLASSES, retentionDays, type RetentionClassName } from "./policy";

/** One class as /database shows it and `bounded_retention_overdue_seconds` reports it. */
export interface RetentionStatus {
  name: RetentionClassName;
  holds: string;
  variable: string;
  days: number;
  cutoff: Date;
  /** The oldest row the class would prune that is still there (null: none past or not past, nothing kept). */
  oldestKept: Date | null;
  /** Real seconds the oldest prunable row is past its retention: 0 when the pass is keeping up. */
  overdueSeconds: number;
  tables: { table: string; bytes: number; rowsEstimate: number }[];
}

/** The age columns' oldest prunable row, per class, by the same rules as the pass (./prune.ts). */
const OLDEST: Record<RetentionClassName, Prisma.Sql> = {
  // A job that may wait on a person is left out: it is never pruned while it does.
  job_detail: Prisma.sql`SELECT min("finishedAt") AS oldest FROM "Job"
    WHERE "detailPrunedAt" IS NULL AND "finishedAt" IS NOT NULL AND status::text <> ALL(${[...OPERATOR_STATUSES]})`,
  model_calls: Prisma.sql`SELECT min("startedAt") AS oldest FROM "ModelCall"`,
  webhook_deliveries: Prisma.sql`SELECT min("createdAt") AS oldest FROM "WebhookDelivery" WHERE status <> 'pending'`,
  rollups: Prisma.sql`SELECT least((SELECT min(hour) FROM "ModelCallRollup"), (SELECT min(day) FROM "ModelCallRollupDay"),
    (SELECT min(day) FROM "KindFiguresDay"), (SELECT min(minute) FROM "RateLimitRollup")) AS oldest`,
  quota_records: Prisma.sql`SELECT least((SELECT min("reclaimedAt") FROM "ReserveReclaim"),
    (SELECT min("releasedAt") FROM "LateRelease" WHERE resolution <> 'debt' OR "debtSettledAt" IS NOT NULL)) AS oldest`,
  audit: Prisma.sql`SELECT least((SELECT min(at) FROM "AuditEntry"), (SELECT min(minute) FROM "AuditRefusalTally")) AS oldest`,
};

export interface TableSize {
  bytes: number;
  rowsEstimate: number;
}

/** Each class's retention, its oldest row and how far past it is, with its tables' sizes when given (`tableSizes`). */
export async function retentionStatus(
  options: { now?: Date; sizes?: Map<string, TableSize>; env?: Env } = {},
): Promise<RetentionStatus[]> {
  const now = options.now ?? new Date();
  const e = options.env ?? env();
  const sizes = options.sizes ?? new Map<string, TableSize>();
  const statuses: RetentionStatus[] = [];
  for (const c of RETENTION_CLASSES) {
    const [row] = await db().$queryRaw<{ oldest: Date | null }[]>(OLDEST[c.name]);
    const oldest = row?.oldest ?? null;
    const cutoff = cutoffOf(c.name, now, e);
    statuses.push({
      name: c.name,
      holds: c.holds,
      variable: c.variable,
      days: retentionDays(c.name, e),
      cutoff,
      oldestKept: oldest,
      overdueSeconds: oldest ? Math.max(0, (cutoff.getTime() - oldest.getTime()) / 1000) : 0,
      tables: c.tables
        .filter((t, i, all) => all.findIndex((u) => u.table === t.table) === i)
        .map((t) => ({ table: t.table, ...(sizes.get(t.table) ?? { bytes: 0, rowsEstimate: 0 }) })),
    });
  }
  return statuses;
}

/** Every table's size on disk (with its indexes and TOAST) and its live rows, from the statistics: no scan. */
export async function tableSizes(): Promise<Map<string, TableSize>> {
  // Live rows as the statistics count them (a table never analyzed has no estimate in pg_class).
  const rows = await db().$queryRaw<{ table: string; bytes: bigint; rows: bigint }[]>`
    SELECT relname AS table, pg_total_relation_size(relid) AS bytes, n_live_tup AS rows
    FROM pg_stat_user_tables WHERE schemaname = current_schema()`;
  return new Map(rows.map((r) => [r.table, { bytes: Number(r.bytes), rowsEstimate: Number(r.rows) }]));
}
