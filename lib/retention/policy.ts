import { env, type Env } from "@/lib/env";

/**
 * What Bounded keeps and for how long: each class of history has a number of days in the
 * environment (real days, fractions allowed) — but the tenant's own results, which each tenant
 * keeps as long as it chooses — and the retention pass (./prune.ts) removes what is older. What no
 * class names is kept: the tenant's marketplace records, invoices and images (its current data,
 * not history), users and settings.
 */
export interface RetentionClass {
  name: RetentionClassName;
  /** The environment variable that sets its days; null: each tenant's own (`Tenant.resultsRetainDays`). */
  variable: keyof Env | null;
  /** What it holds, in words, for /database and the retention script. */
  holds: string;
  /** Its tables, and the column whose age decides (for job detail: the job's end). */
  tables: readonly { table: string; ageColumn: string }[];
}

export const RETENTION_CLASS_NAMES = [
  "job_detail",
  "jobs",
  "tenant_results",
  "model_calls",
  "webhook_deliveries",
  "rollups",
  "quota_records",
  "audit",
] as const;
export type RetentionClassName = (typeof RETENTION_CLASS_NAMES)[number];

/** The tables whose rows belong to one job's detail, removed together once the job ended long enough ago. */
export const JOB_DETAIL_TABLES = [
  "JobItem",
  "JobItemFailure",
  "JobEvent",
  "Upload",
  "JobFile",
  "CategoryAnswerUse",
  "JobBatch",
  "CategoryReask",
] as const;

export const RETENTION_CLASSES: readonly RetentionClass[] = [
  {
    name: "job_detail",
    variable: "BOUNDED_RETAIN_JOB_DETAIL_DAYS",
    holds:
      "a finished job's items, failed rows, timeline, answer records and the bytes of its uploaded files — its row, counts, outcome, file names and results stay; never a job that waits on a person",
    tables: JOB_DETAIL_TABLES.map((table) => ({ table, ageColumn: "Job.finishedAt" })),
  },
  {
    name: "jobs",
    variable: "BOUNDED_RETAIN_JOBS_DAYS",
    holds:
      "a finished job's own row — its outcome and counts — once its detail is gone and no result of the tenant's names it; its progress link then opens nothing",
    tables: [{ table: "Job", ageColumn: "finishedAt" }],
  },
  {
    name: "tenant_results",
    variable: null,
    holds:
      "a tenant's own results: the transactions of its imports and its stored category answers, kept as long as the tenant chose after the job that made them ended (none chosen: until the tenant is deleted)",
    tables: [
      { table: "Transaction", ageColumn: "Job.finishedAt" },
      { table: "CategoryAnswer", ageColumn: "createdAt" },
    ],
  },
  {
    name: "model_calls",
    variable: "BOUNDED_RETAIN_MODEL_CALLS_DAYS",
    holds: "each model, tool and OCR call — the hourly and daily rollups keep their counts, tokens and latency",
    tables: [{ table: "ModelCall", ageColumn: "startedAt" }],
  },
  {
    name: "webhook_deliveries",
    variable: "BOUNDED_RETAIN_WEBHOOK_DELIVERIES_DAYS",
    holds: "webhook deliveries that ended (delivered, or failed for good); one still being tried stays",
    tables: [{ table: "WebhookDelivery", ageColumn: "createdAt" }],
  },
  {
    name: "rollups",
    variable: "BOUNDED_RETAIN_ROLLUPS_DAYS",
    holds:
      "the per-hour, per-day and per-week summaries the pages and projections read (calls, a kind's figures, rate-limit waits)",
    tables: [
      { table: "ModelCallRollup", ageColumn: "hour" },
      { table: "ModelCallRollupDay", ageColumn: "day" },
      { table: "ModelCallRollupWeek", ageColumn: "week" },
      { table: "KindFiguresDay", ageColumn: "day" },
      { table: "RateLimitRollup", ageColumn: "minute" },
    ],
  },
  {
    name: "quota_records",
    variable: "BOUNDED_RETAIN_QUOTA_RECORDS_DAYS",
    holds: "reserves the sweeper reclaimed and late releases that are settled; an unsettled debt stays",
    tables: [
      { table: "ReserveReclaim", ageColumn: "reclaimedAt" },
      { table: "LateRelease", ageColumn: "releasedAt" },
    ],
  },
  {
    name: "audit",
    variable: "BOUNDED_RETAIN_AUDIT_DAYS",
    holds: "operator actions and refused calls — the longest kept",
    tables: [
      { table: "AuditEntry", ageColumn: "at" },
      { table: "AuditRefusalTally", ageColumn: "minute" },
    ],
  },
];

const DAY_MS = 86_400_000;

/** A class's days as the environment sets them. */
/** A class whose days the environment sets. */
export type PlatformClassName = Exclude<RetentionClassName, "tenant_results">;

export function retentionDays(name: PlatformClassName, e: Env = env()): number {
  return e[classOf(name).variable!] as number;
}

/** What is older than this is removed. */
export function cutoffOf(name: PlatformClassName, now: Date, e: Env = env()): Date {
  return daysBefore(now, retentionDays(name, e));
}

export function daysBefore(now: Date, days: number): Date {
  return new Date(now.getTime() - days * DAY_MS);
}

export function classOf(name: RetentionClassName): RetentionClass {
  return RETENTION_CLASSES.find((c) => c.name === name)!;
}
