-- AlterTable
ALTER TABLE "Job" ADD COLUMN     "queueJobId" TEXT,
ADD COLUMN     "reschedules" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "slotMsUsed" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "wakeUpAt" TIMESTAMP(3);

-- CreateTable
CREATE TABLE "MarketplaceRecord" (
    "tenantId" UUID NOT NULL,
    "family" TEXT NOT NULL,
    "externalId" TEXT NOT NULL,
    "data" JSONB NOT NULL,
    "jobId" UUID NOT NULL,
    "page" INTEGER NOT NULL,
    "syncedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "MarketplaceRecord_pkey" PRIMARY KEY ("tenantId","family","externalId")
);

-- CreateTable
CREATE TABLE "RateLimitRollup" (
    "minute" TIMESTAMP(3) NOT NULL,
    "queue" TEXT NOT NULL,
    "family" TEXT NOT NULL,
    "tenant" TEXT NOT NULL,
    "reschedules" INTEGER NOT NULL,
    "waitMs" BIGINT NOT NULL,
    "maxWaitMs" INTEGER NOT NULL,

    CONSTRAINT "RateLimitRollup_pkey" PRIMARY KEY ("minute","queue","family","tenant")
);

-- CreateIndex
CREATE INDEX "MarketplaceRecord_jobId_idx" ON "MarketplaceRecord"("jobId");

-- CreateIndex
CREATE INDEX "RateLimitRollup_tenant_minute_idx" ON "RateLimitRollup"("tenant", "minute");

-- AddForeignKey
ALTER TABLE "MarketplaceRecord" ADD CONSTRAINT "MarketplaceRecord_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
