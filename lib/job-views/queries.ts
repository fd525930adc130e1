import { z } from "zod";
import { db, type Prisma } from "@/lib/db/client";
import { env } from "@/lib/env";
import { formatWaitSeconds } from "@/lib/format/duration";
import { JOB_KINDS, kindSpec } from "@/lib/catalog/catalog";
import { getBlockedBy, type BlockedBy } from "@/lib/diagnosis/blocked-by";
import { withTimeout } from "@/lib/ratelimit/scripts";
import { customerWaitSentence } from "@/lib/diagnosis/blocked-by-customer";
import { partOf, storedSplitOf } from "@/lib/jobs/parts";
import { estimateFrom, measuredRate, type RateBasis } from "@/lib/projection/progress-rate";
import { nounOf, removedByRetentionMessage } from "@/lib/jobs/messages";
import { JOB_STATUSES, OPEN_STATUSES, TERMINAL_STATUSES, isTerminal, type JobStatus } from "@/lib/core/job-statuses";

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

/** How long a job's answer (the job page, the progress page) waits for the live state of why it waits (real ms). */
const BLOCKED_BY_WAIT_MS = 1_000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A row of the jobs list (/jobs, the overview's latest jobs, `GET /api/jobs`): who, what, how far
 * and when. Not the stuck and awaiting-operator reports' record (`JobSummary`, lib/diagnosis/job-summary.ts).
 */
export interface JobListItem {
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

const listItemSelect = {
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

type ListItemRow = Prisma.JobGetPayload<{ select: typeof listItemSelect }>;

function toListItem(row: ListItemRow): JobListItem {
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

/** A search (`q`) that matches more tenants or files than this filters through the join instead of by id. */
const SEARCH_MATCHES_BY_ID = 500;

/** The fewest characters searched for in what jobs processed: below three, a trigram index cannot serve the pattern. */
const MIN_CONTENT_QUERY = 3;

/** The fewest hex digits read as the start of a job id: "abc" is more likely a tenant or a file name. */
const MIN_ID_PREFIX = 4;

/** What people paste from a page that shortens an id: "abcd1234…". */
const TRAILING_ELLIPSIS = /(…|\.\.\.)$/;

/**
 * The job ids that start with `q`, as a range of the uuid primary key: pages show a job by its
 * first eight hex digits (`JobLink`), and `abcd1234` is every id from
 * `abcd1234-0000-0000-0000-000000000000` to `abcd1234-ffff-ffff-ffff-ffffffffffff` — one index
 * range, where a text match on the id would read every row. A full id is a range of one. Dashes
 * are ignored, a trailing "…" too; null when `q` is not the start of an id.
 */
export function idPrefixRange(q: string): { gte: string; lte: string } | null {
  const hex = q.trim().toLowerCase().replace(TRAILING_ELLIPSIS, "").replaceAll("-", "");
  if (hex.length < MIN_ID_PREFIX || hex.length > 32 || !/^[0-9a-f]+$/.test(hex)) return null;
  const asUuid = (h: string) =>
    `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  return { gte: asUuid(hex.padEnd(32, "0")), lte: asUuid(hex.padEnd(32, "f")) };
}

/**
 * `s` as literal text inside a LIKE pattern. Prisma's `contains` and `startsWith` pass `%` and
 * `_` through as wildcards (a search for "%" would match everything), so they are escaped with
 * PostgreSQL's default LIKE escape, the backslash.
 */
export function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/**
 * The jobs whose processed content contains `pattern` (an ILIKE pattern), at most `limit` + 1: an
 * imported row's counterparty or description, or an item's failure reason. Trigram indexes serve
 * both (migration 20261206130000_job_search_by_content), so a search costs the matches it reads,
 * not the history.
 */
async function jobsByContent(pattern: string, limit: number): Promise<string[]> {
  const rows = await db().$queryRaw<{ jobId: string }[]>`
    (SELECT DISTINCT "jobId"::text AS "jobId" FROM "Transaction"
     WHERE (counterparty || ' ' || description) ILIKE ${pattern} LIMIT ${limit + 1})
    UNION
    (SELECT DISTINCT "jobId"::text FROM "JobItemFailure" WHERE reason ILIKE ${pattern} LIMIT ${limit + 1})
    LIMIT ${limit + 1}`;
  return rows.map((r) => r.jobId);
}

/**
 * What `q` matches, resolved before the list query: the ids it starts (a primary-key range), the
 * tenants whose slug it starts, the jobs whose uploaded file name (a CSV import's, or any
 * document of an OCR batch) contains it, and — from three characters — the jobs whose rows
 * (counterparty, description) or failure reasons contain it, case-insensitively. Tenants and files become id lists, so
 * the planner reads index ranges instead of joining every job; a `q` that matches more of them
 * than `SEARCH_MATCHES_BY_ID` — most jobs, then — filters through the join, and the newest-first
 * scan finds a page at once. Null: nothing matches, the list is empty.
 */
async function searchScope(q: string): Promise<Prisma.JobWhereInput | null> {
  const range = idPrefixRange(q);
  const slugPrefix = escapeLike(q.toLowerCase());
  // Trigram indexes serve the leading wildcard (migration 20261203121500_job_search_by_filename).
  const filePattern = `%${escapeLike(q)}%`;
  const [tenants, fileJobs, contentJobs] = await Promise.all([
    db().tenant.findMany({
      where: { slug: { startsWith: slugPrefix } },
      select: { id: true },
      take: SEARCH_MATCHES_BY_ID + 1,
    }),
    db().$queryRaw<{ jobId: string }[]>`
      SELECT "jobId"::text AS "jobId" FROM "Upload" WHERE filename ILIKE ${filePattern}
      UNION
      SELECT "jobId"::text FROM "JobFile" WHERE filename ILIKE ${filePattern}
      LIMIT ${SEARCH_MATCHES_BY_ID + 1}`,
    q.trim().length >= MIN_CONTENT_QUERY ? jobsByContent(filePattern, SEARCH_MATCHES_BY_ID) : Promise.resolve([]),
  ]);
  const any: Prisma.JobWhereInput[] = [];
  if (range) any.push({ id: range });
  if (tenants.length > SEARCH_MATCHES_BY_ID) any.push({ tenant: { slug: { startsWith: slugPrefix } } });
  else if (tenants.length > 0) any.push({ tenantId: { in: tenants.map((t) => t.id) } });
  if (fileJobs.length > SEARCH_MATCHES_BY_ID) {
    const named = { contains: escapeLike(q), mode: "insensitive" as const };
    any.push({ upload: { is: { filename: named } } }, { files: { some: { filename: named } } });
  } else if (fileJobs.length > 0) any.push({ id: { in: fileJobs.map((f) => f.jobId) } });
  if (contentJobs.length > SEARCH_MATCHES_BY_ID) {
    const named = { contains: escapeLike(q), mode: "insensitive" as const };
    any.push(
      { transactions: { some: { OR: [{ counterparty: named }, { description: named }] } } },
      { failures: { some: { reason: named } } },
    );
  } else if (contentJobs.length > 0) any.push({ id: { in: contentJobs } });
  if (any.length === 0) return null;
  return any.length === 1 ? any[0]! : { OR: any };
}

/**
 * The tenant and search parts of a list filter, resolved to ids before the list query: with
 * `tenantId` as a value the planner reads one tenant's jobs newest first from the (tenantId,
 * createdAt) index and stops after a page; through the join it reads every job of the tenant and
 * sorts them. Null: no tenant matches, the list is empty.
 */
async function tenantScope(f: { tenant?: string; q?: string }): Promise<Prisma.JobWhereInput[] | null> {
  const scope: Prisma.JobWhereInput[] = [];
  const [tenant, search] = await Promise.all([
    f.tenant
      ? db().tenant.findUnique({ where: { slug: f.tenant.toLowerCase() }, select: { id: true } })
      : Promise.resolve(undefined),
    f.q ? searchScope(f.q) : Promise.resolve(undefined),
  ]);
  if (tenant === null || search === null) return null;
  if (tenant) scope.push({ tenantId: tenant.id });
  if (search) scope.push(search);
  return scope;
}

/**
 * Newest first; `q` matches the start of a job id (the short id pages show, or the full one), the
 * start of a tenant's slug, part of an uploaded file's name, or part of what the job processed — a
 * row's counterparty or description, a failure's reason (see `searchScope`). Keyset
 * pagination: `after` is the last job of the previous page, and the next page is the jobs strictly
 * before it in (createdAt, id) order. The bound is written as `createdAt <= c AND (createdAt < c OR id < i)`
 * so that `createdAt <= c` is an index condition: a later page costs what the first one does,
 * however deep it is (an OR alone, as Prisma's `cursor` writes it, is a filter over every newer
 * row).
 */
export async function listJobs(filter: JobFilter): Promise<{ jobs: JobListItem[]; nextAfter: string | null }> {
  const f = jobFilterSchema.parse(filter);
  const [scope, cursor] = await Promise.all([
    tenantScope(f),
    f.after ? db().job.findUnique({ where: { id: f.after }, select: { createdAt: true } }) : Promise.resolve(undefined),
  ]);
  // No such tenant, or a cursor that names no job (deleted with its tenant): nothing follows.
  if (scope === null || cursor === null) return { jobs: [], nextAfter: null };
  const conditions: Prisma.JobWhereInput[] = [
    ...(f.status ? [{ status: f.status }] : []),
    ...(f.kind ? [{ kind: f.kind }] : []),
    ...scope,
    ...(cursor && f.after
      ? [
          { createdAt: { lte: cursor.createdAt } },
          { OR: [{ createdAt: { lt: cursor.createdAt } }, { id: { lt: f.after } }] },
        ]
      : []),
  ];
  const rows = await db().job.findMany({
    where: { AND: conditions },
    select: listItemSelect,
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: f.limit + 1,
  });
  const page = rows.slice(0, f.limit);
  return { jobs: page.map(toListItem), nextAfter: rows.length > f.limit ? (page.at(-1)?.id ?? null) : null };
}

/** The window of finished jobs the overview counts. */
export const RECENT_FINISHED_MS = 24 * 3_600_000;

/**
 * Jobs per status for the overview: every job still queued, running or delayed, and the jobs that
 * finished in the last 24 hours. Not all history — that count grows with every job ever run, and
 * "1,204 failed" from last year is not what on-call needs. Each status is one range of the
 * (status, updatedAt) or (status, finishedAt) index.
 */
export async function countJobsByStatus(now = new Date()): Promise<Record<JobStatus, number>> {
  const since = new Date(now.getTime() - RECENT_FINISHED_MS);
  const [open, finished] = await Promise.all([
    // `in` the open statuses, not `notIn` the terminal ones: a NOT IN reads the whole table.
    db().job.groupBy({ by: ["status"], where: { status: { in: [...OPEN_STATUSES] } }, _count: { _all: true } }),
    db().job.groupBy({
      by: ["status"],
      where: { status: { in: [...TERMINAL_STATUSES] }, finishedAt: { gte: since } },
      _count: { _all: true },
    }),
  ]);
  const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])) as Record<JobStatus, number>;
  for (const g of [...open, ...finished]) counts[g.status] = g._count._all;
  return counts;
}

export interface JobDetail extends JobListItem {
  cursor: number;
  budgetSoftMs: number;
  budgetHardMs: number;
  budgetSource: string;
  heartbeatAt: string | null;
  startedAt: string | null;
  /** When its latest run started (a new attempt, or a resume of one). */
  attemptStartedAt: string | null;
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
  /** When it was split: by whom (`auto` when projected not to fit) and into how many parts in all. */
  splitBy: string | null;
  splitParts: number | null;
  events: { at: string; type: string; attempt: number; message: string }[];
  /** When the retention pass removed its row-level detail (lib/retention); null while it is kept. */
  detailPrunedAt: string | null;
  /** Why it is not running, for a queued or delayed job (lib/diagnosis/blocked-by.ts); null otherwise. */
  blockedBy: BlockedBy | null;
}

/** A part shows the progress a row of the jobs list does, and where it sits in the original job. */
export interface PartSummary
  extends Pick<JobListItem, "id" | "status" | "total" | "processed" | "failed" | "attempt" | "message"> {
  index: number;
  /** Positions of the original job's items this part covers: from + 1 … to. */
  from: number;
  to: number;
}

async function partsOf(parentId: string): Promise<PartSummary[]> {
  const rows = await db().job.findMany({
    where: { parentId },
    select: {
      id: true,
      status: true,
      total: true,
      processed: true,
      failed: true,
      attempt: true,
      message: true,
      params: true,
    },
  });
  return rows
    .map((r) => {
      const part = partOf(r.params);
      return {
        id: r.id,
        index: part?.index ?? 0,
        status: r.status,
        total: r.total,
        processed: r.processed,
        failed: r.failed,
        attempt: r.attempt,
        message: r.message,
        from: part?.from ?? 0,
        to: part?.to ?? 0,
      };
    })
    .sort((a, b) => a.index - b.index);
}

/** Item failures of a job and of its parts: a split job's list is the whole file's. */
function failuresWhere(id: string): Prisma.JobItemFailureWhereInput {
  return { OR: [{ jobId: id }, { job: { parentId: id } }] };
}

/**
 * Whether a job page has a job to show: one indexed lookup, made before the page streams, so an
 * unknown id is a real 404 while the page itself loads behind its loading state.
 */
export async function jobExists(id: string): Promise<boolean> {
  return UUID.test(id) && (await db().job.count({ where: { id } })) > 0;
}

export async function getJob(id: string, failuresLimit = 200): Promise<JobDetail | null> {
  if (!UUID.test(id)) return null;
  const row = await db().job.findUnique({
    where: { id },
    select: {
      ...listItemSelect,
      cursor: true,
      budgetSoftMs: true,
      budgetHardMs: true,
      budgetSource: true,
      heartbeatAt: true,
      startedAt: true,
      attemptStartedAt: true,
      finishedAt: true,
      detailPrunedAt: true,
      progressToken: true,
      upload: { select: { filename: true, sizeBytes: true, delimiter: true } },
      params: true,
      events: { select: { at: true, type: true, attempt: true, message: true }, orderBy: { at: "asc" }, take: 500 },
    },
  });
  if (!row) return null;
  const [failures, failuresTotal, children, blockedBy] = await Promise.all([
    db().jobItemFailure.findMany({
      where: failuresWhere(id),
      select: { row: true, reason: true, attempt: true },
      orderBy: { row: "asc" },
      take: failuresLimit,
    }),
    db().jobItemFailure.count({ where: failuresWhere(id) }),
    partsOf(id),
    row.status === "queued" || row.status === "delayed"
      ? withTimeout(getBlockedBy(id), BLOCKED_BY_WAIT_MS).catch(() => null)
      : null,
  ]);
  const part = partOf(row.params);
  const split = storedSplitOf(row.params);
  return {
    ...toListItem(row),
    cursor: row.cursor,
    budgetSoftMs: row.budgetSoftMs,
    budgetHardMs: row.budgetHardMs,
    budgetSource: row.budgetSource,
    heartbeatAt: row.heartbeatAt?.toISOString() ?? null,
    startedAt: row.startedAt?.toISOString() ?? null,
    attemptStartedAt: row.attemptStartedAt?.toISOString() ?? null,
    finishedAt: row.finishedAt?.toISOString() ?? null,
    detailPrunedAt: row.detailPrunedAt?.toISOString() ?? null,
    progressToken: row.progressToken,
    upload: row.upload,
    failures,
    failuresTotal,
    children,
    partOf: part ? { jobId: part.of, index: part.index, count: part.count, from: part.from, to: part.to } : null,
    splitBy: split?.by ?? null,
    splitParts: split?.ranges.length ?? null,
    events: row.events.map((e) => ({ ...e, at: e.at.toISOString() })),
    blockedBy,
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
  /** Real seconds until the job is expected to finish (see `estimateFrom`); null while not known. */
  etaSeconds: number | null;
  /** When the job is expected to finish, on the customer's clock; null while not known. */
  expectedFinishAt: string | null;
  /** Items per real second: measured from the job's recent commits, or projected before there are enough. */
  rate: { perSecond: number; basis: RateBasis } | null;
  failures: { row: number; reason: string }[];
  /**
   * When the job was split: how its parts are doing (no ids). Kept for API compatibility; the
   * customer's page shows one job and does not draw it.
   */
  children?: { index: number; status: JobStatus; total: number | null; processed: number; failed: number }[];
  /** While the job waits in *delayed* for a rate-limit window: production seconds until it goes on. */
  waitSeconds?: number;
  /** While it is queued or delayed: why it waits, in the customer's words (lib/diagnosis/blocked-by-customer.ts). */
  waiting?: string;
  /** Once the retention pass removed its detail (failures, files): what was removed and when (`detailRemovedMessage`). */
  removedByRetention: string | null;
}

/** What a progress link looks like (16 random bytes in hex): anything else opens no job and touches nothing. */
const PROGRESS_TOKEN = /^[0-9a-f]{32}$/;

/** Whether `token` has the shape of a progress link (it may still open no job). */
export function isProgressToken(token: string): boolean {
  return PROGRESS_TOKEN.test(token);
}

function progressTitle(
  kind: string,
  total: number | null,
  filename: string | null,
  params: Prisma.JsonValue = null,
): string {
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

/**
 * The status a split job's estimate goes by: the job stays running while its parts run one after
 * another, so a part waiting in *delayed* for a rate-limit window is the job waiting — no pace to
 * extrapolate. A part merely queued is the gap between two parts and keeps the estimate.
 */
function statusForEstimate(status: JobStatus, parts: readonly PartSummary[]): JobStatus {
  return status === "running" && parts.some((p) => p.status === "delayed") ? "delayed" : status;
}

/** The job a progress link opens, with what its page shows of it. */
async function progressRow(token: string) {
  return db().job.findUnique({
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
      detailPrunedAt: true,
      resultsPrunedAt: true,
      tenant: { select: { resultsRetainDays: true } },
      upload: { select: { filename: true } },
    },
  });
}

type ProgressRow = NonNullable<Awaited<ReturnType<typeof progressRow>>>;

/** Its first failures, its parts, its measured pace (running) and why it waits (queued or delayed), read at once. */
async function progressDetails(row: ProgressRow, now: Date) {
  // All at once: each is one round trip, and the answer waits for the slowest, not for their sum.
  return Promise.all([
    db().jobItemFailure.findMany({
      where: failuresWhere(row.id),
      select: { row: true, reason: true },
      orderBy: { row: "asc" },
      take: PROGRESS_FAILURES_SHOWN,
    }),
    partsOf(row.id),
    // Read for a running job even when a part's wait will make the estimate unknown.
    row.status === "running" ? measuredRate(row.id, now) : null,
    // Why it waits is a help, not the answer: a Redis that does not answer within 1 s leaves it out
    // rather than holding or failing the customer's page (which then says what the row says).
    row.status === "queued" || row.status === "delayed"
      ? withTimeout(getBlockedBy(row.id, now), BLOCKED_BY_WAIT_MS).catch(() => null)
      : null,
  ]);
}

/** The message of a job waiting in *delayed* for a rate-limit window, and its seconds to go; else the row's own. */
function progressWait(row: ProgressRow, now: Date): { message: string | null; waitSeconds: number | undefined } {
  // What the operators read names the bucket; the end user is told what happens and for how long.
  let waitSeconds: number | undefined;
  let message = row.message;
  if (row.status === "delayed" && row.wakeUpAt) {
    const waitMs = (row.wakeUpAt.getTime() - now.getTime()) / env().BOUNDED_TIME_SCALE;
    waitSeconds = Math.max(1, Math.ceil(waitMs / 1000));
    const what =
      kindSpec(row.kind)?.provider === "marketplace"
        ? "the marketplace's rate limit"
        : "a busy outside service to free up";
    message = `Waiting ${formatWaitSeconds(waitMs)} for ${what}; it goes on by itself.`;
  }
  return { message, waitSeconds };
}

export async function getProgress(token: string, now = new Date()): Promise<Progress | null> {
  if (!isProgressToken(token)) return null;
  const row = await progressRow(token);
  if (!row) return null;
  const [failures, parts, measured, blockedBy] = await progressDetails(row, now);
  const estimate = estimateFrom({ ...row, status: statusForEstimate(row.status, parts) }, measured, now);
  const { message, waitSeconds } = progressWait(row, now);
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
    etaSeconds: estimate.secondsLeft === null ? null : Math.max(1, Math.round(estimate.secondsLeft)),
    expectedFinishAt: estimate.finishAt?.toISOString() ?? null,
    rate: estimate.rate,
    failures,
    removedByRetention: removedByRetentionMessage({ ...row, resultsRetainDays: row.tenant.resultsRetainDays }),
    ...(waitSeconds !== undefined ? { waitSeconds } : {}),
    ...(blockedBy ? { waiting: customerWaitSentence(blockedBy, row.kind, now, env().BOUNDED_TIME_SCALE) } : {}),
    ...(parts.length > 0
      ? {
          children: parts.map((p) => ({
            index: p.index,
            status: p.status,
            total: p.total,
            processed: p.processed,
            failed: p.failed,
          })),
        }
      : {}),
  };
}
