-- A job's progress page reads the items its job and parts committed in the last minute, every
-- second while it is open: by job and time, not by scanning every item of the job.
CREATE INDEX "JobItem_jobId_committedAt_idx" ON "JobItem"("jobId", "committedAt");
