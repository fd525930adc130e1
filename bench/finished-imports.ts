/**
 * A history of finished imports as the import leaves them, ended 100 days ago (past every default
 * retention of their detail): set-based INSERT … SELECT generate_series statements for a database
 * migrated with the project's migrations. `bench:retention` times a pass over it; `bench:import`
 * prunes it while an import runs.
 *
 * Per job: its Job row (completed with errors), its stored file (80 bytes a row), its timeline (4
 * events), a failure, and one model call per 8 rows 40 days ago; per row: its Transaction, JobItem
 * and answer record. One tenant, `bench-retention`.
 */

const TENANT_ID = "00000000-0000-4000-8000-000000000001";

export interface FinishedImports {
  /** The statements that load the history, in order. */
  load: string[];
  /** The Transaction columns `transactions` selects, as an INSERT's column list. */
  transactionColumns: string;
  /** A SELECT of every job's imported rows (a counterparty and a description of a bank export's length). */
  transactions: string;
}

/**
 * `jobs` finished imports of `rows` rows (one of them failed). `transactions: false` leaves out
 * their Transaction rows (the tenant's results, which no class of job detail prunes; half the load).
 */
export function finishedImports(jobs: number, rows: number, options: { transactions?: boolean } = {}): FinishedImports {
  const transactionColumns = `("tenantId", "jobId", row, date, "amountMinor", currency, counterparty, description, "categoryId")`;
  const transactions = `SELECT '${TENANT_ID}', md5('job' || j)::uuid, r + 1, date '2026-01-01' + (r % 300),
     (r * 37 % 100000) - 50000, 'EUR', 'Counterparty ' || (r * 7919 % 5000), 'payment ' || md5(j || ':' || r), 1 + r % 13
   FROM generate_series(1, ${jobs}) j, generate_series(1, ${rows - 1}) r`;
  const load = [
    `INSERT INTO "Tenant" (id, slug) VALUES ('${TENANT_ID}', 'bench-retention')`,
    `INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs",
       "budgetSource", "progressToken", "createdAt", "startedAt", "finishedAt", "updatedAt")
     SELECT md5('job' || j)::uuid, 'csv_import', 'imports', '${TENANT_ID}', 'completed_with_errors',
       ${rows}, ${rows} - 1, 1, ${rows}, 1, 600000, 900000, 'default', md5('token' || j),
       now() - interval '100 days', now() - interval '100 days', now() - interval '100 days', now() - interval '100 days'
     FROM generate_series(1, ${jobs}) j`,
    `INSERT INTO "Upload" ("jobId", filename, delimiter, "sizeBytes", content)
     SELECT md5('job' || j)::uuid, 'statement-' || j || '.csv', ',', ${rows * 80}, convert_to(repeat('x', ${rows * 80}), 'UTF8')
     FROM generate_series(1, ${jobs}) j`,
    ...(options.transactions === false ? [] : [`INSERT INTO "Transaction" ${transactionColumns} ${transactions}`]),
    `INSERT INTO "JobItem" ("jobId", item, attempt, ok, "committedAt")
     SELECT md5('job' || j)::uuid, r, 1, r < ${rows}, now() - interval '100 days'
     FROM generate_series(1, ${jobs}) j, generate_series(1, ${rows}) r`,
    `INSERT INTO "CategoryAnswerUse" ("jobId", row, "jobKind", source, model, "promptTokens", "completionTokens", "callShare")
     SELECT md5('job' || j)::uuid, r + 1, 'csv_import', 'model', 'bounded-sim-1', 90, 4, 0.125
     FROM generate_series(1, ${jobs}) j, generate_series(1, ${rows - 1}) r`,
    `INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
     SELECT md5('job' || j)::uuid, now() - interval '100 days', e, 1, 'Attempt 1 ' || e || ' (budget 600 s soft, 900 s hard, default)'
     FROM generate_series(1, ${jobs}) j, unnest(array['created', 'started', 'projected', 'completed_with_errors']) e`,
    `INSERT INTO "JobItemFailure" ("jobId", row, reason, attempt)
     SELECT md5('job' || j)::uuid, ${rows + 1}, 'amount is zero', 1 FROM generate_series(1, ${jobs}) j`,
    `INSERT INTO "ModelCall" (queue, "jobKind", "jobId", model, "startedAt", "durationMs", outcome, "batchSize", "promptTokens", "completionTokens")
     SELECT 'imports', 'csv_import', md5('job' || j)::uuid, 'bounded-sim-1', now() - interval '40 days', 5500, 'ok', 8, 720, 32
     FROM generate_series(1, ${jobs}) j, generate_series(1, ${Math.ceil(rows / 8)}) c`,
  ];
  return { load, transactionColumns, transactions };
}
