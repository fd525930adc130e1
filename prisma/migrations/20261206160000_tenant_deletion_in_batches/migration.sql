-- A tenant's deletion goes in small batches (lib/actions/tenant-deletion.ts) instead of one
-- transaction: the row says that it was started, so the tenant starts no new work, and how far
-- it got, so an interrupted deletion is finished by the next pass.

-- When an operator confirmed the deletion; null: the tenant is not being deleted.
ALTER TABLE "Tenant" ADD COLUMN "deletingAt" TIMESTAMP(3);

-- Rows removed so far, per table: each batch adds its count in the statement that deletes them.
ALTER TABLE "Tenant" ADD COLUMN "deletedRows" JSONB NOT NULL DEFAULT '{}';

-- The deletions to continue: each pass reads only the tenants being deleted.
CREATE INDEX "Tenant_deletingAt_idx" ON "Tenant" ("deletingAt") WHERE "deletingAt" IS NOT NULL;
