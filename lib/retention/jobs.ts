import { TERMINAL_STATUSES } from "@/lib/core/job-statuses";
import { db, Prisma } from "@/lib/db/client";
import { endedRows } from "@/lib/diagnosis/awaiting-operator";
import { OPERATOR_STATUSES, resumeRuleOf } from "@/lib/diagnosis/resume-policy";
import { SEE_THE_LIST } from "@/lib/jobs/messages";
import { type ClassRun, pacedOutOfTime, type Removed, utc } from "./pass";
import { daysBefore, JOB_DETAIL_TABLES } from "./policy";

/**
 * The classes of history a job leaves: its detail (items, failures, timeline, file bytes), its
 * own row once nothing else of it is left, and — as each tenant chose — its results. Jobs go
 * oldest end first, a batch at a time (a keyset on the end and the id, so jobs skipped on purpose
 * are read past, not again).
 */

/** Where a batch of jobs, oldest end first, goes on from: past the last job the batch before read. */
type JobKey = { finishedAt: Date; id: string } | null;

function pastKey(after: JobKey, alias = ""): Prisma.Sql {
  if (after === null) return Prisma.sql`TRUE`;
  const [end, id] = [Prisma.raw(`${alias}"finishedAt"`), Prisma.raw(`${alias}id`)];
  return Prisma.sql`(${end}, ${id}) > (${utc(after.finishedAt)}, ${after.id}::uuid)`;
}

/**
 * Finished jobs, oldest end first, whose detail is older than the retention: each batch's rows
 * marked pruned and their detail deleted in one transaction. Skipped: a job that waits on a
 * person (`withoutThoseAwaiting`), and a part whose job has not ended. The mark is set first, under
 * the row's lock and only while the row is still terminal, so a retry at the same moment either
 * reopens the job before (and it is not pruned) or finds it pruned (and refuses).
 */
export async function pruneJobDetail(run: ClassRun): Promise<Removed> {
  const removed: Record<string, number> = Object.fromEntries(JOB_DETAIL_TABLES.map((t) => [t, 0]));
  let jobs = 0;
  let after: JobKey = null;
  for (;;) {
    const candidates = await finishedJobsPast(run, after);
    if (candidates.length === 0) return { removed, jobs, behind: false };
    after = candidates[candidates.length - 1]!;
    const ids = await withoutThoseAwaiting(candidates);
    const counts = run.dryRun ? await detailRowsOf(ids) : await deleteDetail(ids, run.now);
    jobs += counts.jobs;
    for (const t of JOB_DETAIL_TABLES) removed[t]! += counts.rows[t] ?? 0;
    if (candidates.length < run.batch) return { removed, jobs, behind: false };
    if (await pacedOutOfTime(run)) return { removed, jobs, behind: true };
  }
}

interface Candidate {
  id: string;
  status: string;
  finishedAt: Date;
}

async function finishedJobsPast(run: ClassRun, after: JobKey): Promise<Candidate[]> {
  return db().$queryRaw<Candidate[]>`
    SELECT j.id, j.status::text AS status, j."finishedAt"
    FROM "Job" j
    WHERE j."detailPrunedAt" IS NULL AND j."finishedAt" IS NOT NULL AND j."finishedAt" < ${utc(run.cutoff)}
      AND j.status::text = ANY(${[...TERMINAL_STATUSES]})
      AND ${pastKey(after, "j.")}
      AND NOT EXISTS (SELECT 1 FROM "Job" p WHERE p.id = j."parentId" AND p.status::text <> ALL(${[...TERMINAL_STATUSES]}))
    ORDER BY j."finishedAt", j.id
    LIMIT ${run.batch}`;
}

/**
 * The candidates less those a person has to act on, now or once the platform's own resumes are
 * spent: an ended job whose rule awaits a person (lib/diagnosis/resume-policy.ts) and that nobody has
 * retried, split, marked handled or marked failed since (lib/diagnosis/awaiting-operator.ts `endedRows`).
 */
async function withoutThoseAwaiting(candidates: Candidate[]): Promise<string[]> {
  const mayAwait = candidates
    .filter((c) => (OPERATOR_STATUSES as readonly string[]).includes(c.status))
    .map((c) => c.id);
  const rows = mayAwait.length === 0 ? [] : await endedRows(mayAwait);
  const awaiting = new Set(
    rows
      .filter((r) => resumeRuleOf({ status: r.status, kind: r.kind, message: r.message, hasParts: false })?.awaits)
      .map((r) => r.id),
  );
  return candidates.map((c) => c.id).filter((id) => !awaiting.has(id));
}

/**
 * How each detail table gives up a job's rows. An uploaded file's bytes (Upload, JobFile) are
 * emptied rather than its row deleted: its name, size and what was read from it (a document's
 * text and summary, the customer's result) stay, the bytes go.
 */
const DETAIL_TABLE_SQL = JOB_DETAIL_TABLES.map((table) => ({
  table,
  from: Prisma.raw(`"${table}"`),
  emptied: table === "Upload" || table === "JobFile",
}));

async function detailRowsOf(ids: string[]): Promise<{ jobs: number; rows: Record<string, number> }> {
  const rows: Record<string, number> = {};
  for (const { table, from, emptied } of DETAIL_TABLE_SQL) {
    const [r] = await db().$queryRaw<{ n: bigint }[]>`
      SELECT count(*) AS n FROM ${from} WHERE "jobId" = ANY(${ids}::uuid[]) ${emptied ? Prisma.sql`AND length(content) > 0` : Prisma.empty}`;
    rows[table] = Number(r!.n);
  }
  return { jobs: ids.length, rows };
}

async function deleteDetail(ids: string[], now: Date): Promise<{ jobs: number; rows: Record<string, number> }> {
  if (ids.length === 0) return { jobs: 0, rows: {} };
  return db().$transaction(async (tx) => {
    const marked = await tx.$queryRaw<{ id: string }[]>`
      UPDATE "Job" SET "detailPrunedAt" = ${utc(now)}, message = replace(message, ${SEE_THE_LIST}, '')
      WHERE id = ANY(${ids}::uuid[]) AND "detailPrunedAt" IS NULL AND status::text = ANY(${[...TERMINAL_STATUSES]})
      RETURNING id`;
    const kept = marked.map((m) => m.id);
    const rows: Record<string, number> = {};
    for (const { table, from, emptied } of DETAIL_TABLE_SQL)
      rows[table] = emptied
        ? await tx.$executeRaw`UPDATE ${from} SET content = ''::bytea WHERE "jobId" = ANY(${kept}::uuid[]) AND length(content) > 0`
        : await tx.$executeRaw`DELETE FROM ${from} WHERE "jobId" = ANY(${kept}::uuid[])`;
    return { jobs: kept.length, rows };
  });
}

/**
 * Finished jobs whose detail is gone and that hold no results, ended before the cutoff: their rows
 * deleted (what still names them goes with them: webhook deliveries by cascade; model calls keep
 * their figures, unlinked). A part goes before the job it was split from; a job whose parts are not
 * all going waits for them.
 */
export async function pruneJobs(run: ClassRun): Promise<Removed> {
  let jobs = 0;
  let after: JobKey = null;
  for (;;) {
    const candidates: { id: string; finishedAt: Date }[] = await db().$queryRaw`
      SELECT id, "finishedAt" FROM "Job"
      WHERE "detailPrunedAt" IS NOT NULL AND (kind <> 'csv_import' OR "resultsPrunedAt" IS NOT NULL)
        AND "finishedAt" < ${utc(run.cutoff)}
        AND ${pastKey(after)}
      ORDER BY "finishedAt", id LIMIT ${run.batch}`;
    if (candidates.length === 0) return { removed: { Job: jobs }, jobs, behind: false };
    after = candidates[candidates.length - 1]!;
    const ids = candidates.map((c) => c.id);
    jobs += run.dryRun ? ids.length : await deleteJobRows(ids);
    if (candidates.length < run.batch) return { removed: { Job: jobs }, jobs, behind: false };
    if (await pacedOutOfTime(run)) return { removed: { Job: jobs }, jobs, behind: true };
  }
}

async function deleteJobRows(ids: string[]): Promise<number> {
  return db().$transaction(async (tx) => {
    const parts = await tx.$executeRaw`DELETE FROM "Job" WHERE id = ANY(${ids}::uuid[]) AND "parentId" IS NOT NULL`;
    const whole = await tx.$executeRaw`
      DELETE FROM "Job" j WHERE j.id = ANY(${ids}::uuid[])
        AND NOT EXISTS (SELECT 1 FROM "Job" c WHERE c."parentId" = j.id)`;
    return parts + whole;
  });
}

/**
 * Each tenant that chose how long to keep its results (`Tenant.resultsRetainDays`): the
 * transactions of its imports that ended before then, a batch of jobs at a time, and its stored
 * category answers written before then. Never an import a person still has to act on (a retry
 * resumes from what it wrote).
 */
export async function pruneTenantResults(run: ClassRun): Promise<Removed> {
  const removed: Record<string, number> = { Transaction: 0, CategoryAnswer: 0 };
  let jobs = 0;
  const tenants = await db().tenant.findMany({
    where: { resultsRetainDays: { not: null } },
    select: { id: true, resultsRetainDays: true },
  });
  for (const tenant of tenants) {
    const cutoff = daysBefore(run.now, tenant.resultsRetainDays!);
    const done = await pruneResultsOf(tenant.id, { ...run, cutoff });
    removed.Transaction! += done.transactions;
    removed.CategoryAnswer! += done.answers;
    jobs += done.jobs;
    if (done.behind) return { removed, jobs, behind: true };
  }
  return { removed, jobs, behind: false };
}

async function pruneResultsOf(
  tenantId: string,
  run: ClassRun,
): Promise<{ transactions: number; answers: number; jobs: number; behind: boolean }> {
  const answers = run.dryRun
    ? await db().categoryAnswer.count({ where: { tenantId, createdAt: { lt: run.cutoff } } })
    : (await db().categoryAnswer.deleteMany({ where: { tenantId, createdAt: { lt: run.cutoff } } })).count;
  let transactions = 0;
  let jobs = 0;
  let after: JobKey = null;
  for (;;) {
    const candidates: Candidate[] = await db().$queryRaw`
      SELECT id, status::text AS status, "finishedAt" FROM "Job"
      WHERE "tenantId" = ${tenantId}::uuid AND kind = 'csv_import' AND "resultsPrunedAt" IS NULL
        AND "finishedAt" IS NOT NULL AND "finishedAt" < ${utc(run.cutoff)}
        AND status::text = ANY(${[...TERMINAL_STATUSES]})
        AND ${pastKey(after)}
      ORDER BY "finishedAt", id LIMIT ${run.batch}`;
    if (candidates.length === 0) return { transactions, answers, jobs, behind: false };
    after = candidates[candidates.length - 1]!;
    const ids = await withoutThoseAwaiting(candidates);
    const counts = run.dryRun ? await resultRowsOf(ids) : await deleteResults(ids, run.now);
    transactions += counts.transactions;
    jobs += counts.jobs;
    if (candidates.length < run.batch) return { transactions, answers, jobs, behind: false };
    if (await pacedOutOfTime(run)) return { transactions, answers, jobs, behind: true };
  }
}

async function resultRowsOf(ids: string[]): Promise<{ transactions: number; jobs: number }> {
  const [r] = await db().$queryRaw<{ n: bigint }[]>`
    SELECT count(*) AS n FROM "Transaction" WHERE "jobId" = ANY(${ids}::uuid[])`;
  return { transactions: Number(r!.n), jobs: ids.length };
}

async function deleteResults(ids: string[], now: Date): Promise<{ transactions: number; jobs: number }> {
  if (ids.length === 0) return { transactions: 0, jobs: 0 };
  return db().$transaction(async (tx) => {
    const marked = await tx.$queryRaw<{ id: string }[]>`
      UPDATE "Job" SET "resultsPrunedAt" = ${utc(now)}
      WHERE id = ANY(${ids}::uuid[]) AND "resultsPrunedAt" IS NULL AND status::text = ANY(${[...TERMINAL_STATUSES]})
      RETURNING id`;
    const kept = marked.map((m) => m.id);
    const transactions = await tx.$executeRaw`DELETE FROM "Transaction" WHERE "jobId" = ANY(${kept}::uuid[])`;
    return { transactions, jobs: kept.length };
  });
}
