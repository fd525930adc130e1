-- Retention (lib/retention) of a job's own row and of a tenant's results.

-- Days a tenant keeps its own results (the transactions of its imports, its stored category
-- answers) after the job that made them ended; null: kept until the tenant is deleted. The
-- tenant's choice, not a platform default.
ALTER TABLE "Tenant" ADD COLUMN "resultsRetainDays" DOUBLE PRECISION;

-- When the retention pass removed an import's transactions, as its tenant chose.
ALTER TABLE "Job" ADD COLUMN "resultsPrunedAt" TIMESTAMP(3);

-- The jobs class's candidates, oldest end first: finished jobs whose detail is gone and that hold
-- no results (a kind that writes none, or an import whose results went). Each pass reads only
-- what it can delete, whatever the number of jobs kept for their results.
CREATE INDEX "Job_row_prunable_finishedAt_idx" ON "Job" ("finishedAt")
  WHERE "detailPrunedAt" IS NOT NULL AND (kind <> 'csv_import' OR "resultsPrunedAt" IS NOT NULL);

-- A tenant's imports whose results are still kept, oldest end first: the tenant_results class reads
-- the tenants that chose a retention, never the history of those that keep everything.
CREATE INDEX "Job_results_kept_idx" ON "Job" ("tenantId", "finishedAt")
  WHERE kind = 'csv_import' AND "resultsPrunedAt" IS NULL AND "finishedAt" IS NOT NULL;
