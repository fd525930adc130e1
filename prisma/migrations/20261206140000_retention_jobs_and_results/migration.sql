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

-- A job's answer to its customer changes when retention removes its detail or its results (the
-- sentence that says so, no downloads): both announce it, as the other columns it is made from do.
DROP TRIGGER job_progress_changed ON "Job";
CREATE TRIGGER job_progress_changed
  AFTER UPDATE OF status, total, processed, failed, message, "startedAt", "finishedAt", "wakeUpAt", params, "parentId",
    "detailPrunedAt", "resultsPrunedAt" ON "Job"
  FOR EACH ROW
  WHEN (
    OLD.status IS DISTINCT FROM NEW.status OR OLD.total IS DISTINCT FROM NEW.total
    OR OLD.processed IS DISTINCT FROM NEW.processed OR OLD.failed IS DISTINCT FROM NEW.failed
    OR OLD.message IS DISTINCT FROM NEW.message OR OLD."startedAt" IS DISTINCT FROM NEW."startedAt"
    OR OLD."finishedAt" IS DISTINCT FROM NEW."finishedAt" OR OLD."wakeUpAt" IS DISTINCT FROM NEW."wakeUpAt"
    OR OLD.params IS DISTINCT FROM NEW.params OR OLD."parentId" IS DISTINCT FROM NEW."parentId"
    OR OLD."detailPrunedAt" IS DISTINCT FROM NEW."detailPrunedAt" OR OLD."resultsPrunedAt" IS DISTINCT FROM NEW."resultsPrunedAt"
  )
  EXECUTE FUNCTION bounded_notify_job_progress();
