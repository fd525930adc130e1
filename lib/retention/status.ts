import { db, Prisma } from "@/lib/db/client";
import { env, type Env } from "@/lib/env";
import { OPERATOR_STATUSES } from "@/lib/diagnosis/resume-policy";
import {
  cutoffOf,
  daysBefore,
  type PlatformClassName,
  RETENTION_CLASSES,
  type RetentionClass,
  type RetentionClassName,
  retentionDays,
} from "./policy";

/** One class as /database shows it and `bounded_retention_overdue_seconds` reports it. */
export interface RetentionStatus {
  name: RetentionClassName;
  holds: string;
  /** The environment variable that sets its days; null: each tenant's own. */
  variable: string | null;
  /** Its days; null for the tenants' results (each tenant's choice: `tenantsChoosing` of them chose). */
  days: number | null;
  cutoff: Date | null;
  tenantsChoosing?: number;
  /** The oldest row the class would prune that is still there (null: none past or not past, nothing kept). */
  oldestKept: Date | null;
  /** Real seconds the oldest prunable row is past its retention: 0 when the pass is keeping up. */
  overdueSeconds: number;
  tables: { table: string; bytes: number; rowsEstimate: number }[];
}

/** The age columns' oldest prunable row, per class, by the same rules as the pass (./prune.ts). */
const OLDEST: Record<PlatformClassName, Prisma.Sql> = {
  // A job that may wait on a person is left out: it is never pruned while it does.
  job_detail: Prisma.sql`SELECT min("finishedAt") AS oldest FROM "Job"
    WHERE "detailPrunedAt" IS NULL AND "finishedAt" IS NOT NULL AND status::text <> ALL(${[...OPERATOR_STATUSES]})`,
  jobs: Prisma.sql`SELECT min("finishedAt") AS oldest FROM "Job"
    WHERE "detailPrunedAt" IS NOT NULL AND (kind <> 'csv_import' OR "resultsPrunedAt" IS NOT NULL)`,
  model_calls: Prisma.sql`SELECT min("startedAt") AS oldest FROM "ModelCall"`,
  webhook_deliveries: Prisma.sql`SELECT min("createdAt") AS oldest FROM "WebhookDelivery" WHERE status <> 'pending'`,
  rollups: Prisma.sql`SELECT least((SELECT min(hour) FROM "ModelCallRollup"), (SELECT min(day) FROM "ModelCallRollupDay"),
    (SELECT min(week) FROM "ModelCallRollupWeek"),
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
    if (c.name === "tenant_results") {
      statuses.push({
        ...(await tenantResultsStatus(now)),
        name: c.name,
        holds: c.holds,
        variable: null,
        tables: sized(c, sizes),
      });
      continue;
    }
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
      tables: sized(c, sizes),
    });
  }
  return statuses;
}

function sized(c: RetentionClass, sizes: Map<string, TableSize>): RetentionStatus["tables"] {
  return c.tables
    .filter((t, i, all) => all.findIndex((u) => u.table === t.table) === i)
    .map((t) => ({ table: t.table, ...(sizes.get(t.table) ?? { bytes: 0, rowsEstimate: 0 }) }));
}

/**
 * The tenants that chose how long to keep their results: how many, and the import whose results
 * are furthest past its tenant's days (one index read per such tenant; those that keep everything
 * are not read). A job that waits on a person is left out, as the pass leaves it.
 */
async function tenantResultsStatus(
  now: Date,
): Promise<Pick<RetentionStatus, "days" | "cutoff" | "oldestKept" | "overdueSeconds" | "tenantsChoosing">> {
  const rows = await db().$queryRaw<{ days: number; oldest: Date | null }[]>`
    SELECT t."resultsRetainDays" AS days, o.oldest FROM "Tenant" t
    CROSS JOIN LATERAL (
      SELECT min(j."finishedAt") AS oldest FROM "Job" j
      WHERE j."tenantId" = t.id AND j.kind = 'csv_import' AND j."resultsPrunedAt" IS NULL AND j."finishedAt" IS NOT NULL
        AND j.status::text <> ALL(${[...OPERATOR_STATUSES]})) o
    WHERE t."resultsRetainDays" IS NOT NULL`;
  let overdueSeconds = 0;
  let oldestKept: Date | null = null;
  for (const r of rows) {
    if (!r.oldest) continue;
    if (!oldestKept || r.oldest < oldestKept) oldestKept = r.oldest;
    overdueSeconds = Math.max(overdueSeconds, (daysBefore(now, r.days).getTime() - r.oldest.getTime()) / 1000);
  }
  return { days: null, cutoff: null, oldestKept, overdueSeconds, tenantsChoosing: rows.length };
}

/** Every table's size on disk (with its indexes and TOAST) and its live rows, from the statistics: no scan. */
export async function tableSizes(): Promise<Map<string, TableSize>> {
  // Live rows as the statistics count them (a table never analyzed has no estimate in pg_class).
  const rows = await db().$queryRaw<{ table: string; bytes: bigint; rows: bigint }[]>`
    SELECT relname AS table, pg_total_relation_size(relid) AS bytes, n_live_tup AS rows
    FROM pg_stat_user_tables WHERE schemaname = current_schema()`;
  return new Map(rows.map((r) => [r.table, { bytes: Number(r.bytes), rowsEstimate: Number(r.rows) }]));
}
