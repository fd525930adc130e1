import { db, Prisma } from "@/lib/db/client";
import { env, type Env } from "@/lib/env";
import { TERMINAL_STATUSES } from "@/lib/core/job-statuses";
import { SEE_THE_LIST } from "@/lib/jobs/messages";
import { endedRows } from "@/lib/diagnosis/awaiting-operator";
import { OPERATOR_STATUSES, resumeRuleOf } from "@/lib/diagnosis/resume-policy";
import { classOf, cutoffOf, JOB_DETAIL_TABLES, RETENTION_CLASSES, type RetentionClassName } from "./policy";

/**
 * One retention pass: each class's rows older than its days (./policy.ts) are deleted in small
 * batches, each its own short transaction, so the work never waits long behind a pass. A class
 * that still has rows past its retention when its share of the pass is used up is `behind`; the
 * next pass goes on from there. A dry run deletes nothing and counts what a pass would remove.
 */
export interface PruneOptions {
  now?: Date;
  dryRun?: boolean;
  /** Rows (for job detail: jobs) per batch. @defaultValue 500 */
  batch?: number;
  /** Real ms a class may take in one pass before it is left for the next. @defaultValue 5,000 */
  classBudgetMs?: number;
  /** Only these classes. @defaultValue all */
  classes?: readonly RetentionClassName[];
  env?: Env;
}

export interface ClassPruned {
  name: RetentionClassName;
  cutoff: Date;
  /** Rows removed (or, in a dry run, that would be), per table. */
  removed: Record<string, number>;
  /** For job detail: the jobs whose detail was removed. */
  jobs?: number;
  /** Rows past the retention still there when the class's share of the pass ran out. */
  behind: boolean;
}

export async function pruneOnce(options: PruneOptions = {}): Promise<ClassPruned[]> {
  const now = options.now ?? new Date();
  const e = options.env ?? env();
  const names = options.classes ?? RETENTION_CLASSES.map((c) => c.name);
  const results: ClassPruned[] = [];
  for (const name of names) {
    const cutoff = cutoffOf(name, now, e);
    const run: ClassRun = {
      cutoff,
      now,
      batch: options.batch ?? 500,
      until: performance.now() + (options.classBudgetMs ?? 5_000),
      dryRun: options.dryRun ?? false,
    };
    const pruned = name === "job_detail" ? await pruneJobDetail(run) : await pruneTables(name, run);
    results.push({ name, cutoff, ...pruned });
  }
  return results;
}

interface ClassRun {
  cutoff: Date;
  now: Date;
  batch: number;
  /** `performance.now()` past which the class stops and is `behind` if anything is left. */
  until: number;
  dryRun: boolean;
}

/** A Date as a parameter of a `timestamp` (UTC) comparison, as the rest of the statements write it. */
const utc = (d: Date) => Prisma.sql`${d.toISOString()}::timestamptz AT TIME ZONE 'UTC'`;

/** What of a table's rows is never pruned, whatever its age. */
const KEPT: Record<string, Prisma.Sql> = {
  WebhookDelivery: Prisma.sql`AND status <> 'pending'`,
  LateRelease: Prisma.sql`AND (resolution <> 'debt' OR "debtSettledAt" IS NOT NULL)`,
};

/** A class of tables each aged by a column of its own: oldest rows first, a batch at a time. */
async function pruneTables(
  name: Exclude<RetentionClassName, "job_detail">,
  run: ClassRun,
): Promise<{ removed: Record<string, number>; behind: boolean }> {
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
      if (performance.now() > run.until) {
        behind = true;
        break;
      }
    }
  }
  return { removed, behind };
}

/**
 * Finished jobs, oldest end first, whose detail is older than the retention: each batch's rows
 * marked pruned and their detail deleted in one transaction. Skipped: a job that waits on a person
 * (lib/diagnosis/awaiting-operator.ts), and a part whose job has not ended. The mark is set first, under
 * the row's lock and only while the row is still terminal, so a retry at the same moment either
 * reopens the job before (and it is not pruned) or finds it pruned (and refuses).
 */
async function pruneJobDetail(
  run: ClassRun,
): Promise<{ removed: Record<string, number>; jobs: number; behind: boolean }> {
  const removed: Record<string, number> = Object.fromEntries(JOB_DETAIL_TABLES.map((t) => [t, 0]));
  let jobs = 0;
  let after: { finishedAt: Date; id: string } | null = null;
  for (;;) {
    const candidates = await finishedJobsPast(run, after);
    if (candidates.length === 0) return { removed, jobs, behind: false };
    after = candidates[candidates.length - 1]!;
    const ids = await withoutThoseAwaiting(candidates);
    const counts = run.dryRun ? await detailRowsOf(ids) : await deleteDetail(ids, run.now);
    jobs += counts.jobs;
    for (const t of JOB_DETAIL_TABLES) removed[t]! += counts.rows[t] ?? 0;
    if (candidates.length < run.batch) return { removed, jobs, behind: false };
    if (performance.now() > run.until) return { removed, jobs, behind: true };
  }
}

interface Candidate {
  id: string;
  status: string;
  finishedAt: Date;
}

async function finishedJobsPast(run: ClassRun, after: { finishedAt: Date; id: string } | null): Promise<Candidate[]> {
  return db().$queryRaw<Candidate[]>`
    SELECT j.id, j.status::text AS status, j."finishedAt"
    FROM "Job" j
    WHERE j."detailPrunedAt" IS NULL AND j."finishedAt" IS NOT NULL AND j."finishedAt" < ${utc(run.cutoff)}
      AND j.status::text = ANY(${[...TERMINAL_STATUSES]})
      AND (${after === null} OR (j."finishedAt", j.id) > (${utc(after?.finishedAt ?? run.cutoff)}, ${after?.id ?? null}::uuid))
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
