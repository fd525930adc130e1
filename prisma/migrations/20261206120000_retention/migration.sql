-- Retention (lib/retention): what a pass prunes, read through indexes so that a pass costs the rows
-- it removes, not the history.

-- When a finished job's row-level detail (items, failures, timeline, stored file, answer uses,
-- batch) was removed; its row, counts and outcome stay.
ALTER TABLE "Job" ADD COLUMN "detailPrunedAt" TIMESTAMP(3);

-- Finished jobs whose detail is still kept, oldest end first: the pass's and the /database page's
-- one read, whatever the number of jobs already pruned.
CREATE INDEX "Job_detail_kept_finishedAt_idx" ON "Job" ("finishedAt") WHERE "detailPrunedAt" IS NULL AND "finishedAt" IS NOT NULL;

-- Webhook deliveries, oldest first.
CREATE INDEX "WebhookDelivery_createdAt_idx" ON "WebhookDelivery" ("createdAt");

-- The audit log stays append-only for everyone but the retention pass: it may delete entries (never
-- change them) inside a transaction that sets bounded.retention = 'audit' (lib/retention/prune.ts).
CREATE OR REPLACE FUNCTION bounded_audit_is_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('bounded.retention', true) = 'audit' THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION 'the audit log is append-only';
END
$$;
