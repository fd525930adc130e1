-- The customer's progress answer is kept as one snapshot per job (lib/progress/). Every change to
-- what that answer shows, whoever writes it (an item's commit, a run's end, the watchdog thread's
-- own SQL, a deferral, an operator's action, a hand-written UPDATE), announces the job's progress
-- token when its transaction commits; the web processes listen, rebuild the snapshot once and
-- push it to the pages watching. A part of a split job announces its parent too: the customer
-- watches the parent. Identical notifications in one transaction are delivered once.
CREATE FUNCTION bounded_notify_progress(job_id uuid) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  token text;
  parent uuid;
BEGIN
  SELECT "progressToken", "parentId" INTO token, parent FROM "Job" WHERE id = job_id;
  IF token IS NOT NULL THEN
    PERFORM pg_notify('bounded_progress_changed', token);
  END IF;
  IF parent IS NOT NULL THEN
    PERFORM pg_notify('bounded_progress_changed', "progressToken") FROM "Job" WHERE id = parent;
  END IF;
END $$;

CREATE FUNCTION bounded_notify_job_progress() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('bounded_progress_changed', NEW."progressToken");
  IF NEW."parentId" IS NOT NULL THEN
    PERFORM pg_notify('bounded_progress_changed', "progressToken") FROM "Job" WHERE id = NEW."parentId";
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION bounded_notify_event_progress() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM bounded_notify_progress(NEW."jobId");
  RETURN NULL;
END $$;

CREATE TRIGGER job_progress_created AFTER INSERT ON "Job"
  FOR EACH ROW EXECUTE FUNCTION bounded_notify_job_progress();

-- Only the columns the customer's answer is made from, and only when one really changed: a
-- heartbeat or a cursor move alone announces nothing.
CREATE TRIGGER job_progress_changed
  AFTER UPDATE OF status, total, processed, failed, message, "startedAt", "finishedAt", "wakeUpAt", params, "parentId" ON "Job"
  FOR EACH ROW
  WHEN (
    OLD.status IS DISTINCT FROM NEW.status OR OLD.total IS DISTINCT FROM NEW.total
    OR OLD.processed IS DISTINCT FROM NEW.processed OR OLD.failed IS DISTINCT FROM NEW.failed
    OR OLD.message IS DISTINCT FROM NEW.message OR OLD."startedAt" IS DISTINCT FROM NEW."startedAt"
    OR OLD."finishedAt" IS DISTINCT FROM NEW."finishedAt" OR OLD."wakeUpAt" IS DISTINCT FROM NEW."wakeUpAt"
    OR OLD.params IS DISTINCT FROM NEW.params OR OLD."parentId" IS DISTINCT FROM NEW."parentId"
  )
  EXECUTE FUNCTION bounded_notify_job_progress();

-- The timeline events the answer reads: waits for an outside service, starts, "handled".
CREATE TRIGGER job_event_progress AFTER INSERT ON "JobEvent"
  FOR EACH ROW
  WHEN (NEW.type IN ('service_wait', 'started', 'handled'))
  EXECUTE FUNCTION bounded_notify_event_progress();
