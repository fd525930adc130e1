-- Signed webhooks: a tenant's endpoint, and one delivery per job ending (the outbox).
CREATE TYPE "WebhookDeliveryStatus" AS ENUM ('pending', 'delivered', 'failed');

CREATE TABLE "WebhookEndpoint" (
    "id" UUID NOT NULL,
    "tenantId" UUID NOT NULL,
    "url" TEXT NOT NULL,
    "secret" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    CONSTRAINT "WebhookEndpoint_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "WebhookEndpoint_tenantId_key" ON "WebhookEndpoint"("tenantId");
ALTER TABLE "WebhookEndpoint" ADD CONSTRAINT "WebhookEndpoint_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "WebhookDelivery" (
    "id" UUID NOT NULL,
    "endpointId" UUID,
    "jobId" UUID NOT NULL,
    "jobStatus" "JobStatus" NOT NULL,
    "url" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "status" "WebhookDeliveryStatus" NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "lastStatusCode" INTEGER,
    "lastError" TEXT,
    "nextAttemptAt" TIMESTAMP(3),
    "queuedAt" TIMESTAMP(3),
    "deliveredAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "WebhookDelivery_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "WebhookDelivery_jobId_createdAt_idx" ON "WebhookDelivery"("jobId", "createdAt");
-- The relay reads only the deliveries still to be sent.
CREATE INDEX "WebhookDelivery_pending_idx" ON "WebhookDelivery"("queuedAt") WHERE "status" = 'pending';
ALTER TABLE "WebhookDelivery" ADD CONSTRAINT "WebhookDelivery_endpointId_fkey" FOREIGN KEY ("endpointId") REFERENCES "WebhookEndpoint"("id") ON DELETE SET NULL ON UPDATE CASCADE;
ALTER TABLE "WebhookDelivery" ADD CONSTRAINT "WebhookDelivery_jobId_fkey" FOREIGN KEY ("jobId") REFERENCES "Job"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- The outbox is written by the database itself, in the transaction that ends the job: every path
-- that writes a terminal status (a run's end, the watchdog thread, the reaper, a cancel, an
-- operator's "mark failed", a split job's last part) gets its delivery, and a rolled-back ending
-- gets none. A different terminal status later (timed out, then killed) is a new delivery.
-- A message written by a follow-up statement (one that needs the final counts) is carried into
-- the deliveries not yet attempted, so the first attempt sends the job's real words.
CREATE FUNCTION bounded_webhook_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    INSERT INTO "WebhookDelivery" (id, "endpointId", "jobId", "jobStatus", url, payload)
    SELECT gen_random_uuid(), e.id, NEW.id, NEW.status, e.url, jsonb_build_object(
             'id', NEW.id, 'kind', NEW.kind, 'tenant', t.slug, 'status', NEW.status,
             'total', NEW.total, 'processed', NEW.processed, 'failed', NEW.failed, 'message', NEW.message,
             'finishedAt', to_char(coalesce(NEW."finishedAt", now() AT TIME ZONE 'UTC'), 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
    FROM "WebhookEndpoint" e JOIN "Tenant" t ON t.id = e."tenantId"
    WHERE e."tenantId" = NEW."tenantId";
  ELSIF NEW.message IS DISTINCT FROM OLD.message THEN
    UPDATE "WebhookDelivery" SET payload = jsonb_set(payload, '{message}', to_jsonb(NEW.message))
    WHERE "jobId" = NEW.id AND "jobStatus" = NEW.status AND status = 'pending' AND attempts = 0;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER job_webhook_outbox AFTER UPDATE OF status, message ON "Job"
  FOR EACH ROW
  WHEN (NEW.status IN ('completed', 'completed_with_errors', 'timed_out', 'killed', 'failed', 'abandoned', 'cancelled'))
  EXECUTE FUNCTION bounded_webhook_outbox();
