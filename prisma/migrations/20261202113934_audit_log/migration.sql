-- CreateEnum
CREATE TYPE "AuditResult" AS ENUM ('ok', 'refused', 'error');

-- CreateTable
CREATE TABLE "AuditEntry" (
    "id" BIGSERIAL NOT NULL,
    "at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "actor" TEXT NOT NULL,
    "role" TEXT,
    "action" TEXT NOT NULL,
    "target" TEXT,
    "params" JSONB,
    "result" "AuditResult" NOT NULL,
    "message" TEXT NOT NULL,
    "clientAddress" TEXT,

    CONSTRAINT "AuditEntry_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "AuditEntry_at_idx" ON "AuditEntry"("at");

-- CreateIndex
CREATE INDEX "AuditEntry_action_at_idx" ON "AuditEntry"("action", "at");

-- CreateIndex
CREATE INDEX "AuditEntry_actor_at_idx" ON "AuditEntry"("actor", "at");

-- The audit log is append-only: the database itself refuses to change or remove an entry.
CREATE FUNCTION bounded_audit_is_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the audit log is append-only';
END
$$;

CREATE TRIGGER audit_entry_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON "AuditEntry"
  FOR EACH STATEMENT EXECUTE FUNCTION bounded_audit_is_append_only();
