-- Not generated: the schema engine's PostgreSQL describer currently fails on the CHECK constraint
-- of 20261202132746_quota_reserves. These are the statements and names it writes for the three
-- @@index lines of Job, so a later generated migration finds the indexes already in place.

-- CreateIndex
CREATE INDEX "Job_status_createdAt_id_idx" ON "Job"("status", "createdAt", "id");

-- CreateIndex
CREATE INDEX "Job_kind_createdAt_id_idx" ON "Job"("kind", "createdAt", "id");

-- CreateIndex
CREATE INDEX "Job_status_finishedAt_idx" ON "Job"("status", "finishedAt");
