-- Rows of an import asked again on a chosen provider (a category_reask job): the earlier answer
-- and the new one, side by side.
CREATE TABLE "CategoryReask" (
    "jobId" UUID NOT NULL,
    "sourceJobId" UUID NOT NULL,
    "row" INTEGER NOT NULL,
    "previousSlug" TEXT,
    "previousModel" TEXT,
    "provider" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "slug" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "CategoryReask_pkey" PRIMARY KEY ("jobId","row")
);

CREATE INDEX "CategoryReask_sourceJobId_createdAt_idx" ON "CategoryReask"("sourceJobId", "createdAt");

ALTER TABLE "CategoryReask" ADD CONSTRAINT "CategoryReask_jobId_fkey" FOREIGN KEY ("jobId") REFERENCES "Job"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "CategoryReask" ADD CONSTRAINT "CategoryReask_sourceJobId_fkey" FOREIGN KEY ("sourceJobId") REFERENCES "Job"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- An import whose rows were asked again changes what its customer's page says (which model
-- answered them): the `reask` event on its timeline announces it, as `handled` does.
DROP TRIGGER job_event_progress ON "JobEvent";
CREATE TRIGGER job_event_progress AFTER INSERT ON "JobEvent"
  FOR EACH ROW
  WHEN (NEW.type IN ('service_wait', 'started', 'handled', 'reask'))
  EXECUTE FUNCTION bounded_notify_event_progress();
