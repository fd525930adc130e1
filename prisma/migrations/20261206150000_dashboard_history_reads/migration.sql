-- The dashboard's reads follow the work in flight and the recent past, not the history: each reads
-- an index that holds only the rows it may return (bench/dashboard.ts measures them at 100× the
-- history).

-- The open jobs (queued, running, delayed), oldest first: the stuck rules' read
-- (lib/diagnosis/stuck-causes.ts `openRows`, which writes the statuses out so the planner can match
-- the predicate) can stop at its cap of the oldest open rows instead of sorting a whole backlog; the
-- index holds only the work in flight, however many jobs have ended.
CREATE INDEX "Job_open_createdAt_idx" ON "Job" ("createdAt", status)
  WHERE status IN ('queued', 'running', 'delayed');

-- Jobs that started in a window (the stuck rules' queue pace, `startsSince`): a range of recent
-- starts instead of a sequential scan of every job.
CREATE INDEX "Job_attemptStartedAt_idx" ON "Job" ("attemptStartedAt");

-- When a person last marked the job handled (its latest `handled` timeline event): kept on the row
-- by the trigger below, so "ended and not handled since" is a condition an index can hold.
ALTER TABLE "Job" ADD COLUMN "handledAt" TIMESTAMP(3);

UPDATE "Job" j SET "handledAt" = e.at
FROM (SELECT "jobId", max(at) AS at FROM "JobEvent" WHERE type = 'handled' GROUP BY "jobId") e
WHERE e."jobId" = j.id;

CREATE OR REPLACE FUNCTION bounded_job_handled_at() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "Job" SET "handledAt" = NEW.at
  WHERE id = NEW."jobId" AND ("handledAt" IS NULL OR "handledAt" < NEW.at);
  RETURN NULL;
END
$$;

CREATE TRIGGER job_event_handled_at AFTER INSERT ON "JobEvent"
  FOR EACH ROW WHEN (NEW.type = 'handled') EXECUTE FUNCTION bounded_job_handled_at();

-- Ended jobs that may wait on a person (lib/diagnosis/awaiting-operator.ts `endedRows`), newest end
-- first: an operator status, not marked handled since it ended, not ended by a person from /stuck.
-- The jobs on-call has dealt with leave the index, so the read costs the jobs that wait, not every
-- job that ever timed out. The predicate is written out the same way in `endedRows`.
CREATE INDEX "Job_awaiting_ended_idx" ON "Job" ((coalesce("finishedAt", "updatedAt")) DESC)
  WHERE status IN ('timed_out', 'killed', 'failed', 'abandoned')
    AND ("handledAt" IS NULL OR "handledAt" < coalesce("finishedAt", "updatedAt"))
    AND (message IS NULL OR left(message, 17) <> 'Marked failed by ');
