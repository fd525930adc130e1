-- The stuck page (live, every few seconds) counts the reaper's `abandoned` events of the last
-- 24 h: by type and time, not by scanning every event of every job.
CREATE INDEX "JobEvent_type_at_idx" ON "JobEvent"("type", "at");

-- Every enqueue sets its priority from the tenant's open jobs in that queue (lib/queues/fairness.ts).
CREATE INDEX "Job_tenantId_queue_status_idx" ON "Job"("tenantId", "queue", "status");
