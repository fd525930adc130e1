import { z } from "zod";
import { db, type Prisma } from "@/lib/db/client";
import { env } from "@/lib/env";
import { JOB_KINDS } from "@/lib/queues/catalog";
import { partOf } from "./parts";
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
  /** Its item failures, and those of its parts when it was split. */
  failures: { row: number; reason: string; attempt: number }[];
  failuresTotal: number;
  /** The parts this job was split into, in order. */
  children: PartSummary[];
  /** The job this one is a part of: its id and which part this is. */
  partOf: { jobId: string; index: number; count: number; from: number; to: number } | null;
  events: { at: string; type: string; attempt: number; message: string }[];
}

export interface PartSummary {
  id: string;
  index: number;
  status: JobStatus;
  total: number | null;
  processed: number;
  failed: number;
  attempt: number;
  message: string | null;
  /** Positions of the original job's items this part covers: from + 1 … to. */
  from: number;
  to: number;
}

async function partsOf(parentId: string): Promise<PartSummary[]> {
  const rows = await db().job.findMany({
    where: { parentId },
    select: { id: true, status: true, total: true, processed: true, failed: true, attempt: true, message: true, params: true },
  });
  return rows
    .map((r) => {
      const part = partOf(r.params);
      return { id: r.id, index: part?.index ?? 0, status: r.status, total: r.total, processed: r.processed, failed: r.failed, attempt: r.attempt, message: r.message, from: part?.from ?? 0, to: part?.to ?? 0 };
    })
    .sort((a, b) => a.index - b.index);
}

/** Item failures of a job and of its parts: a split job's list is the whole file's. */
function failuresWhere(id: string): Prisma.JobItemFailureWhereInput {
  return { OR: [{ jobId: id }, { job: { parentId: id } }] };
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
      params: true,
      events: { select: { at: true, type: true, attempt: true, message: true }, orderBy: { at: "asc" }, take: 500 },
    },
  });
  if (!row) return null;
  const [failures, failuresTotal, children] = await Promise.all([
    db().jobItemFailure.findMany({ where: failuresWhere(id), select: { row: true, reason: true, attempt: true }, orderBy: { row: "asc" }, take: failuresLimit }),
    db().jobItemFailure.count({ where: failuresWhere(id) }),
    partsOf(id),
  ]);
  const part = partOf(row.params);
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
    failures,
    failuresTotal,
    children,
    partOf: part ? { jobId: part.of, index: part.index, count: part.count, from: part.from, to: part.to } : null,
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
  /** When the job was split: how its parts are doing (no ids — the page is the customer's). */
  children?: { index: number; status: JobStatus; total: number | null; processed: number; failed: number }[];
  /** While the job waits in *delayed* for a rate-limit window: production seconds until it goes on. */
  waitSeconds?: number;
}

export const PROGRESS_TOKEN = /^[0-9a-f]{32}$/;

function progressTitle(kind: string, total: number | null, filename: string | null, params: Prisma.JsonValue = null): string {
  switch (kind) {
    case "marketplace_sync": {
      const family = params && typeof params === "object" && !Array.isArray(params) ? params.family : undefined;
      return typeof family === "string" ? `Syncing ${family} from the marketplace` : "Marketplace sync";
    }
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
      id: true,
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
      wakeUpAt: true,
      params: true,
      upload: { select: { filename: true } },
    },
  });
  if (!row) return null;
  const [failures, parts] = await Promise.all([
    db().jobItemFailure.findMany({ where: failuresWhere(row.id), select: { row: true, reason: true }, orderBy: { row: "asc" }, take: PROGRESS_FAILURES_SHOWN }),
    partsOf(row.id),
  ]);
  const done = row.processed + row.failed;
  let etaSeconds: number | null = null;
  if (row.status === "running" && row.startedAt && row.total && done > 0 && done < row.total) {
    const elapsed = (now.getTime() - row.startedAt.getTime()) / 1000;
    etaSeconds = Math.max(1, Math.round((elapsed / done) * (row.total - done)));
  }
  // What the operators read names the bucket; the end user is told what happens and for how long.
  let waitSeconds: number | undefined;
  let message = row.message;
  if (row.status === "delayed" && row.wakeUpAt) {
    waitSeconds = Math.max(1, Math.ceil((row.wakeUpAt.getTime() - now.getTime()) / env().BOUNDED_TIME_SCALE / 1000));
    message = `Waiting ${waitSeconds.toLocaleString("en-US")} s for the marketplace's rate limit; it goes on by itself.`;
  }
  return {
    title: progressTitle(row.kind, row.total, row.upload?.filename ?? null, row.params),
    noun: nounOf(row.kind),
    status: row.status,
    terminal: isTerminal(row.status),
    total: row.total,
    processed: row.processed,
    failed: row.failed,
    message,
    filename: row.upload?.filename ?? null,
    createdAt: row.createdAt.toISOString(),
    startedAt: row.startedAt?.toISOString() ?? null,
    finishedAt: row.finishedAt?.toISOString() ?? null,
    updatedAt: row.updatedAt.toISOString(),
    etaSeconds,
    failures,
    ...(waitSeconds !== undefined ? { waitSeconds } : {}),
    ...(parts.length > 0 ? { children: parts.map((p) => ({ index: p.index, status: p.status, total: p.total, processed: p.processed, failed: p.failed })) } : {}),
  };
}
