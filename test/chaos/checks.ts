/**
 * What a chaos run checks, read straight from PostgreSQL (the system of record): rows that stay
 * non-terminal past their bound while it runs, then — once it has settled — no job lost, no item
 * applied twice (or skipped), the quota books balanced.
 */
import pg from "pg";
import { marketplaceItems } from "../../workers/simulators/marketplace";
import type { RowFinding } from "./explain";
import type { Accepted } from "./workload";

export const TERMINAL = [
  "completed",
  "completed_with_errors",
  "timed_out",
  "killed",
  "failed",
  "abandoned",
  "cancelled",
];
/** The marketplace simulator's defaults (workers/simulators/marketplace.ts): pages per family and items per page. */
const SIM_PAGES = 10;
const SIM_ITEMS_PER_PAGE = 20;

export interface Check {
  name: string;
  ok: boolean;
  /** What was counted, in words; on failure, the first offending rows. */
  detail: string;
}

export interface Overrun {
  id: string;
  kind: string;
  status: string;
  silentMs: number;
  boundMs: number;
}

export class ChaosDb {
  private readonly pool: pg.Pool;

  /** A pool: the watch and the submissions query side by side. */
  constructor(url: string) {
    this.pool = new pg.Pool({ connectionString: url, max: 4 });
    // A stopped PostgreSQL ends the idle connections too: the next query opens a new one.
    this.pool.on("error", () => undefined);
  }

  close(): Promise<void> {
    return this.pool.end();
  }

  private async rows<T>(text: string, params: unknown[] = []): Promise<T[]> {
    return (await this.pool.query(text, params)).rows as T[];
  }

  /**
   * Non-terminal rows (a rate-limit wait in *delayed* excepted, as the invariant says) silent
   * longer than their bound: the job's hard limit (scaled) plus the reaper's grace and one
   * reaper interval since their last sign of life.
   */
  async overruns(scale: number, graceMs: number, intervalMs: number, toleranceMs: number): Promise<Overrun[]> {
    const rows = await this.rows<{ id: string; kind: string; status: string; silent_ms: number; bound_ms: number }>(
      `SELECT id, kind, status::text AS status,
              (EXTRACT(EPOCH FROM ((now() AT TIME ZONE 'UTC') - coalesce("heartbeatAt", "createdAt"))) * 1000)::float8 AS silent_ms,
              ("budgetHardMs" * $1::float8 + $2::float8 + $3::float8) AS bound_ms
       FROM "Job" WHERE status IN ('queued', 'running')`,
      [scale, graceMs, intervalMs],
    );
    return rows
      .filter((r) => r.silent_ms > r.bound_ms + toleranceMs)
      .map((r) => ({
        id: r.id,
        kind: r.kind,
        status: r.status,
        silentMs: Math.round(r.silent_ms),
        boundMs: Math.round(r.bound_ms),
      }));
  }

  async statusCounts(): Promise<Record<string, number>> {
    const rows = await this.rows<{ status: string; n: number }>(
      `SELECT status::text AS status, count(*)::int AS n FROM "Job" GROUP BY 1 ORDER BY 2 DESC`,
    );
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  }

  async statusByKind(): Promise<{ kind: string; status: string; n: number }[]> {
    return this.rows(
      `SELECT kind, status::text AS status, count(*)::int AS n FROM "Job" GROUP BY 1, 2 ORDER BY 1, 3 DESC`,
    );
  }

  async nonTerminal(): Promise<number> {
    const [r] = await this.rows<{ n: number }>(
      `SELECT count(*)::int AS n FROM "Job" WHERE NOT (status::text = ANY($1))`,
      [TERMINAL],
    );
    return r!.n;
  }

  async liveReserves(): Promise<number> {
    const [r] = await this.rows<{ n: number }>(`SELECT count(*)::int AS n FROM "QuotaReserve"`);
    return r!.n;
  }

  /** "tenant/adId" of every ad with a delivered card. */
  async deliveredAds(): Promise<string[]> {
    const rows = await this.rows<{ k: string }>(
      `SELECT DISTINCT t.slug || '/' || a.id AS k FROM "CardImage" c JOIN "Ad" a ON a.id = c."adId" JOIN "Tenant" t ON t.id = a."tenantId"`,
    );
    return rows.map((r) => r.k);
  }

  async quotaTotals(): Promise<{ spent: number; reclaimed: number; late: number; debts: number }> {
    const [r] = await this.rows<{ spent: number; reclaimed: number; late: number; debts: number }>(
      `SELECT (SELECT count(*)::int FROM "QuotaSpend") AS spent, (SELECT count(*)::int FROM "ReserveReclaim") AS reclaimed,
              (SELECT count(*)::int FROM "LateRelease") AS late, (SELECT count(*)::int FROM "LateRelease" WHERE resolution = 'debt' AND "debtSettledAt" IS NULL) AS debts`,
    );
    return r!;
  }

  /** Of these jobs, how many are completed (with or without item failures) right now. */
  async completedOf(ids: string[]): Promise<number> {
    const [r] = await this.rows<{ n: number }>(
      `SELECT count(*)::int AS n FROM "Job" WHERE id = ANY($1::uuid[]) AND status IN ('completed', 'completed_with_errors')`,
      [ids],
    );
    return r!.n;
  }

  /**
   * Rows of the accepted imports that never landed (lost) and that landed more than once
   * (applied twice), counted from the transactions written against the good rows uploaded.
   */
  async importItems(accepted: Accepted[]): Promise<{ expected: number; lost: number; doubled: number }> {
    const imports = accepted.filter((a) => a.rows);
    const rows = await this.rows<{ id: string; written: number; distinct_rows: number }>(
      `SELECT j.id, count(x.id)::int AS written, count(DISTINCT x.row)::int AS distinct_rows
       FROM "Job" j LEFT JOIN "Transaction" x ON x."jobId" = j.id WHERE j.id = ANY($1::uuid[]) GROUP BY j.id`,
      [imports.map((a) => a.jobId)],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    let lost = 0;
    let doubled = 0;
    for (const a of imports) {
      const r = byId.get(a.jobId);
      lost += Math.max(0, a.rows!.good - (r?.distinct_rows ?? 0));
      doubled += r ? r.written - r.distinct_rows : 0;
    }
    return { expected: imports.reduce((s, a) => s + a.rows!.good, 0), lost, doubled };
  }

  /**
   * The rows of the accepted imports that did not end as their file said: a row the file did not
   * break recorded as failed (with its reason, attempt and time), or a good row neither written
   * nor failed (with how its job ended).
   */
  async rowFindings(accepted: Accepted[]): Promise<RowFinding[]> {
    const imports = accepted.filter((a) => a.rows);
    const ids = imports.map((a) => a.jobId);
    const failures = await this.rows<{ jobId: string; row: number; reason: string; attempt: number; at_ms: number }>(
      `SELECT "jobId", row, reason, attempt, (EXTRACT(EPOCH FROM "createdAt") * 1000)::float8 AS at_ms
       FROM "JobItemFailure" WHERE "jobId" = ANY($1::uuid[]) ORDER BY "createdAt"`,
      [ids],
    );
    const written = await this.rows<{ jobId: string; row: number }>(
      `SELECT "jobId", row FROM "Transaction" WHERE "jobId" = ANY($1::uuid[])`,
      [ids],
    );
    const jobs = await this.rows<{
      id: string;
      status: string;
      attempt: number;
      created_ms: number;
      updated_ms: number;
    }>(
      `SELECT id, status::text AS status, attempt, (EXTRACT(EPOCH FROM "createdAt") * 1000)::float8 AS created_ms,
              (EXTRACT(EPOCH FROM "updatedAt") * 1000)::float8 AS updated_ms
       FROM "Job" WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    const job = new Map(jobs.map((j) => [j.id, j]));
    const ended = new Set([...failures, ...written].map((r) => `${r.jobId}/${r.row}`));
    const findings: RowFinding[] = [];
    for (const a of imports) {
      const bad = new Set(a.rows!.badRows);
      for (const f of failures.filter((x) => x.jobId === a.jobId && !bad.has(x.row)))
        findings.push({
          type: "failed",
          jobId: a.jobId,
          row: f.row,
          reason: f.reason,
          attempt: f.attempt,
          at: new Date(f.at_ms),
        });
      const j = job.get(a.jobId);
      // The file's rows are spreadsheet rows 2 … n + 1 (the header is row 1).
      for (let row = 2; row <= a.rows!.good + a.rows!.bad + 1; row++) {
        if (bad.has(row) || ended.has(`${a.jobId}/${row}`)) continue;
        findings.push({
          type: "missing",
          jobId: a.jobId,
          row,
          status: j?.status ?? "no row",
          attempt: j?.attempt ?? 0,
          createdAt: new Date(j?.created_ms ?? 0),
          updatedAt: new Date(j?.updated_ms ?? 0),
        });
      }
    }
    return findings;
  }

  /** The planted missing row: one written row of the last import with more than one, deleted. */
  async deleteOneWrittenRow(accepted: Accepted[]): Promise<{ jobId: string; row: number } | null> {
    const ids = accepted.filter((a) => a.rows && a.rows.good > 1).map((a) => a.jobId);
    const [victim] = await this.rows<{ jobId: string; row: number }>(
      `DELETE FROM "Transaction" WHERE id = (SELECT id FROM "Transaction" WHERE "jobId" = $1::uuid ORDER BY row DESC LIMIT 1)
       RETURNING "jobId", row`,
      [ids.at(-1)],
    );
    return victim ?? null;
  }

  /** The checks made once the system has settled. */
  async finalChecks(accepted: Accepted[]): Promise<Check[]> {
    const checks: Check[] = [];
    const add = (
      name: string,
      bad: unknown[],
      okDetail: string,
      describe: (b: never) => string = (b) => JSON.stringify(b),
    ) =>
      checks.push({
        name,
        ok: bad.length === 0,
        detail: bad.length
          ? `${bad.length} offending: ${bad
              .slice(0, 5)
              .map((b) => describe(b as never))
              .join("; ")}`
          : okDetail,
      });

    // No job lost: every accepted job has its row, and every row ended in a terminal state.
    const ids = accepted.map((a) => a.jobId);
    const found = await this.rows<{ id: string; status: string; kind: string; message: string | null }>(
      `SELECT id, status::text AS status, kind, message FROM "Job" WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    const foundIds = new Set(found.map((r) => r.id));
    add(
      "every accepted job has its row",
      ids.filter((id) => !foundIds.has(id)),
      `${ids.length} accepted, ${found.length} found`,
    );
    const open = await this.rows<{ id: string; kind: string; status: string }>(
      `SELECT id, kind, status::text AS status FROM "Job" WHERE NOT (status::text = ANY($1))`,
      [TERMINAL],
    );
    add("every job row is terminal", open, "0 rows queued, running or delayed");
    const notDone = found.filter((r) => r.status !== "completed" && r.status !== "completed_with_errors");
    add(
      "every accepted job completed (after the operator's retries)",
      notDone,
      `${found.length - notDone.length} of ${found.length} completed`,
      (b: { id: string; kind: string; status: string; message: string | null }) =>
        `${b.kind} ${b.id} ${b.status}: ${b.message}`,
    );

    // Counters agree with what was written: an item applied twice, or skipped, shows here.
    const counts = await this.rows<{
      id: string;
      kind: string;
      status: string;
      total: number | null;
      processed: number;
      failed: number;
      cursor: number;
      written: number;
      failures: number;
    }>(
      `SELECT j.id, j.kind, j.status::text AS status, j.total, j.processed, j.failed, j.cursor,
              CASE j.kind WHEN 'csv_import' THEN (SELECT count(*) FROM "Transaction" x WHERE x."jobId" = j.id)
                          WHEN 'bulk_ocr' THEN (SELECT count(*) FROM "JobFile" f WHERE f."jobId" = j.id AND f.summary IS NOT NULL)
                          WHEN 'card_generation' THEN (SELECT count(*) FROM "CardImage" c WHERE c."jobId" = j.id)
                          ELSE j.processed END::int AS written,
              (SELECT count(*) FROM "JobItemFailure" f WHERE f."jobId" = j.id)::int AS failures
       FROM "Job" j`,
    );
    add(
      "items written = items counted (no item applied twice)",
      counts.filter((c) => c.written !== c.processed),
      `${counts.reduce((s, c) => s + c.written, 0)} items written across ${counts.length} jobs`,
      (c: (typeof counts)[number]) => `${c.kind} ${c.id}: ${c.written} written, processed ${c.processed}`,
    );
    add(
      "failures recorded = failures counted",
      counts.filter((c) => (c.kind === "csv_import" || c.kind === "bulk_ocr") && c.failures !== c.failed),
      `${counts.reduce((s, c) => s + c.failures, 0)} item failures recorded`,
      (c: (typeof counts)[number]) => `${c.kind} ${c.id}: ${c.failures} recorded, failed ${c.failed}`,
    );
    add(
      "a completed job went through every item once",
      counts.filter(
        (c) =>
          (c.status === "completed" || c.status === "completed_with_errors") &&
          c.total !== null &&
          c.kind !== "marketplace_sync" &&
          (c.processed + c.failed !== c.total || c.cursor !== c.total),
      ),
      "processed + failed = cursor = total on every completed job",
      (c: (typeof counts)[number]) =>
        `${c.kind} ${c.id}: ${c.processed} + ${c.failed} of ${c.total}, cursor ${c.cursor}`,
    );

    // What each accepted import and OCR batch must have produced, exactly.
    const byId = new Map(counts.map((c) => [c.id, c]));
    const wrongImports = accepted.filter(
      (a) =>
        a.rows &&
        byId.get(a.jobId) &&
        (byId.get(a.jobId)!.written !== a.rows.good || byId.get(a.jobId)!.failures !== a.rows.bad),
    );
    add(
      "each import wrote exactly its good rows and recorded its bad ones",
      wrongImports,
      `${accepted.filter((a) => a.rows).length} imports, ${accepted.reduce((s, a) => s + (a.rows?.good ?? 0), 0)} transactions as uploaded`,
      (a: Accepted) =>
        `${a.jobId}: ${byId.get(a.jobId)?.written} written of ${a.rows!.good}, ${byId.get(a.jobId)?.failures} failures of ${a.rows!.bad}`,
    );
    const wrongBatches = accepted.filter(
      (a) =>
        a.files &&
        byId.get(a.jobId) &&
        (byId.get(a.jobId)!.total !== a.files.total || byId.get(a.jobId)!.failures < a.files.damaged),
    );
    add(
      "each OCR batch read every file, the damaged ones as failures",
      wrongBatches,
      `${accepted.filter((a) => a.files).length} batches`,
    );

    // Syncs: each completed sync stored its family's records once (upserted by id).
    const syncs = await this.rows<{ id: string; tenant: string; family: string; records: number }>(
      `SELECT j.id, t.slug AS tenant, j.params->>'family' AS family,
              (SELECT count(*) FROM "MarketplaceRecord" r WHERE r."tenantId" = j."tenantId" AND r.family = j.params->>'family')::int AS records
       FROM "Job" j JOIN "Tenant" t ON t.id = j."tenantId" WHERE j.kind = 'marketplace_sync' AND j.status = 'completed'`,
    );
    const expected = (tenant: string, family: string) =>
      new Set(
        Array.from({ length: SIM_PAGES }, (_, p) =>
          marketplaceItems(family as never, tenant, p + 1, SIM_ITEMS_PER_PAGE).map((i) => i.id),
        ).flat(),
      ).size;
    add(
      "each completed sync stored every record of its family",
      syncs.filter((s) => s.records !== expected(s.tenant, s.family)),
      `${syncs.length} syncs, ${syncs.reduce((s, x) => s + x.records, 0)} records`,
      (s: (typeof syncs)[number]) => `${s.family}:${s.tenant} ${s.records} of ${expected(s.tenant, s.family)}`,
    );

    // Quota: the books of every pack balance, nothing is still held, no generation paid twice.
    const packs = await this.rows<{ tenant: string; size: number; remaining: number; spent: number; live: number }>(
      `SELECT t.slug AS tenant, p.size, p.remaining, (SELECT count(*) FROM "QuotaSpend" s WHERE s."packId" = p.id)::int AS spent,
              (SELECT count(*) FROM "QuotaReserve" r WHERE r."packId" = p.id)::int AS live
       FROM "QuotaPack" p JOIN "Tenant" t ON t.id = p."tenantId"`,
    );
    add(
      "quota: remaining + spent + live = size for every pack",
      packs.filter((p) => p.remaining + p.spent + p.live !== p.size),
      `${packs.length} packs balance, ${packs.reduce((s, p) => s + p.spent, 0)} units spent`,
    );
    add(
      "quota: no reserve still held once every generation ended",
      packs.filter((p) => p.live > 0),
      "0 live reserves",
    );
    const doubles = await this.rows<{ jobId: string; spends: number }>(
      `SELECT "jobId", count(*)::int AS spends FROM "QuotaSpend" WHERE "jobId" IS NOT NULL GROUP BY 1 HAVING count(*) > 1`,
    );
    add("quota: no generation charged twice", doubles, "at most one spend per generation job");
    const flags = await this.rows<{ id: string }>(
      `SELECT id FROM "Ad" WHERE (params->>'aiDislikeRetryUsed')::boolean IS TRUE`,
    );
    add("quota: no ad left flagged as being regenerated", flags, "every dislike flag cleared");
    return checks;
  }
}
