-- A tenant's deletion removes the quota books' rows by tenant (lib/actions/tenant-tables.ts): without
-- an index on the tenant, each of its statements read the whole table.
CREATE INDEX "QuotaSpend_tenantId_idx" ON "QuotaSpend"("tenantId");
CREATE INDEX "ReserveReclaim_tenantId_idx" ON "ReserveReclaim"("tenantId");
CREATE INDEX "LateRelease_tenantId_idx" ON "LateRelease"("tenantId");
CREATE INDEX "QuotaReserve_tenantId_idx" ON "QuotaReserve"("tenantId");
