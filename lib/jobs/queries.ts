import { z } from "zod";
import { db, type Prisma } from "@/lib/db/client";
import { JOB_KINDS } from "@/lib/queues/catalog";
import { nounOf } from "./run";
import { JOB_STATUSES, isTerminal, type JobStatus } from "./statuses";

export const jobFilterSchema = z.object({
  status: z.enum(JOB_STATUSES).optional(),
  kind: z.enum(JOB_KINDS).optional(),
  tenant: z.string().trim().max(63).optional(),
  q: z.string().trim().max(100).optional(),
  /** Keyset pagination: the id of the last job of the previous page. */
  after: z.uuid().optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});
export type JobFilter = z.input<typeof jobFilterSchema>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface JobSummary {
  id: string;
  kind: string;
  queue: string;
  tenant: string;
  status: JobStatus;
  total: number | null;
  processed: number;
  failed: number;
  attempt: number;
  message: string | null;
  createdAt: string;
  updatedAt: string;
  parentId: string | null;
}

const summarySelect = {
  id: true,
  kind: true,
  queue: true,
  status: true,
  total: true,
  processed: true,
  failed: true,
  attempt: true,
  message: true,
  createdAt: true,
  updatedAt: true,
  parentId: true,
  tenant: { select: { slug: true } },
} satisfies Prisma.JobSelect;

type SummaryRow = Prisma.JobGetPayload<{ select: typeof summarySelect }>;

function toSummary(row: SummaryRow): JobSummary {
  return {
    id: row.id,
    kind: row.kind,
    queue: row.queue,
    tenant: row.tenant.slug,
    status: row.status,
    total: row.total,
    processed: row.processed,
    failed: row.failed,
    attempt: row.attempt,
    message: row.message,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    parentId: row.parentId,
  };
}

/** Newest first; `q` matches a job id exactly or a tenant by prefix. */
export async function listJobs(filter: JobFilter): Promise<{ jobs: JobSummary[]; nextAfter: string | null }> {
  const f = jobFilterSchema.parse(filter);
  const where: Prisma.JobWhereInput = {
    ...(f.status ? { status: f.status } : {}),
    ...(f.kind ? { kind: f.kind } : {}),
    ...(f.tenant ? { tenant: { slug: f.tenant.toLowerCase() } } : {}),
    ...(f.q
      ? UUID.test(f.q)
        ? { id: f.q.toLowerCase() }
        : { tenant: { slug: { startsWith: f.q.toLowerCase() } } }
      : {}),
  };
  const rows = await db().job.findMany({
    where,
    select: summarySelect,
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: f.limit + 1,
    ...(f.after ? { cursor: { id: f.after }, skip: 1 } : {}),
  });
  const page = rows.slice(0, f.limit);
  return { jobs: page.map(toSummary), nextAfter: rows.length > f.limit ? (page.at(-1)?.id ?? null) : null };
}

export async function countJobsByStatus(): Promise<Record<JobStatus, number>> {
  const groups = await db().job.groupBy({ by: ["status"], _count: { _all: true } });
  const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])) as Record<JobStatus, number>;
  for (const g of groups) counts[g.status] = g._count._all;
  return counts;
}

export interface JobDetail extends JobSummary {
  cursor: number;
  budgetSoftMs: number;
  budgetHardMs: number;
  budgetSource: string;
  heartbeatAt: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  progressToken: string;
  upload: { filename: string; sizeBytes: number; delimiter: string } | null;
  failures: { row: number; reason: string; attempt: number }[];
  failuresTotal: number;
  /** Parts this job was split into. */
  children: number;
  events: { at: string; type: string; attempt: number; message: string }[];
}

export async function getJob(id: string, failuresLimit = 200): Promise<JobDetail | null> {
  if (!UUID.test(id)) return null;
  const row = await db().job.findUnique({
    where: { id },
    select: {
      ...summarySelect,
      cursor: true,
      budgetSoftMs: true,
      budgetHardMs: true,
      budgetSource: true,
      heartbeatAt: true,
      startedAt: true,
      finishedAt: true,
      progressToken: true,
      upload: { select: { filename: true, sizeBytes: true, delimiter: true } },
      failures: { select: { row: true, reason: true, attempt: true }, orderBy: { row: "asc" }, take: failuresLimit },
      events: { select: { at: true, type: true, attempt: true, message: true }, orderBy: { at: "asc" }, take: 500 },
      _count: { select: { failures: true, children: true } },
    },
  });
  if (!row) return null;
  return {
    ...toSummary(row),
    cursor: row.cursor,
    budgetSoftMs: row.budgetSoftMs,
    budgetHardMs: row.budgetHardMs,
    budgetSource: row.budgetSource,
    heartbeatAt: row.heartbeatAt?.toISOString() ?? null,
    startedAt: row.startedAt?.toISOString() ?? null,
    finishedAt: row.finishedAt?.toISOString() ?? null,
    progressToken: row.progressToken,
    upload: row.upload,
    failures: row.failures,
    failuresTotal: row._count.failures,
    children: row._count.children,
    events: row.events.map((e) => ({ ...e, at: e.at.toISOString() })),
  };
}

/** What the end user sees of their own job: no ids, nothing internal. */
export interface Progress {
  /** What the page is about, in the end user's words ("Importing january.csv"). */
  title: string;
  /** What one item is called ("row", "document", "step"). */
  noun: string;
  status: JobStatus;
  terminal: boolean;
  total: number | null;
  processed: number;
  failed: number;
  message: string | null;
  filename: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  updatedAt: string;
  etaSeconds: number | null;
  failures: { row: number; reason: string }[];
}

export const PROGRESS_TOKEN = /^[0-9a-f]{32}$/;

function progressTitle(kind: string, total: number | null, filename: string | null): string {
  switch (kind) {
    case "csv_import":
      return filename ? `Importing ${filename}` : "Your import";
    case "bulk_ocr":
      return total ? `Reading ${total} document${total === 1 ? "" : "s"}` : "Reading your documents";
    case "agent_run":
      return "Agent run";
    case "overdue_invoices":
      return "Overdue-invoice sweep";
    default:
      return "Your job";
  }
}
const PROGRESS_FAILURES_SHOWN = 20;

export async function getProgress(token: string, now = new Date()): Promise<Progress | null> {
  if (!PROGRESS_TOKEN.test(token)) return null;
  const row = await db().job.findUnique({
    where: { progressToken: token },
    select: {
      kind: true,
      status: true,
      total: true,
      processed: true,
      failed: true,
      message: true,
      createdAt: true,
      startedAt: true,
      finishedAt: true,
      updatedAt: true,
      upload: { select: { filename: true } },
      failures: { select: { row: true, reason: true }, orderBy: { row: "asc" }, take: PROGRESS_FAILURES_SHOWN },
    },
  });
  if (!row) return null;
  const done = row.processed + row.failed;
  let etaSeconds: number | null = null;
  if (row.status === "running" && row.startedAt && row.total && done > 0 && done < row.total) {
    const elapsed = (now.getTime() - row.startedAt.getTime()) / 1000;
    etaSeconds = Math.max(1, Math.round((elapsed / done) * (row.total - done)));
  }
  return {
    title: progressTitle(row.kind, row.total, row.upload?.filename ?? null),
    noun: nounOf(row.kind),
    status: row.status,
    terminal: isTerminal(row.status),
    total: row.total,
    processed: row.processed,
    failed: row.failed,
    message: row.message,
    filename: row.upload?.filename ?? null,
    createdAt: row.createdAt.toISOString(),
    startedAt: row.startedAt?.toISOString() ?? null,
    finishedAt: row.finishedAt?.toISOString() ?? null,
    updatedAt: row.updatedAt.toISOString(),
    etaSeconds,
    failures: row.failures,
  };
}
