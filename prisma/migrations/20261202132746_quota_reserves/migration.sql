-- CreateEnum
CREATE TYPE "ReserveKind" AS ENUM ('generate', 'dislike');

-- CreateEnum
CREATE TYPE "LateReleaseOutcome" AS ENUM ('succeeded', 'failed');

-- CreateEnum
CREATE TYPE "LateReleaseResolution" AS ENUM ('charged', 'debt', 'none');

-- CreateTable
CREATE TABLE "QuotaPack" (
    "id" UUID NOT NULL,
    "tenantId" UUID NOT NULL,
    "size" INTEGER NOT NULL,
    "remaining" INTEGER NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "QuotaPack_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "QuotaReserve" (
    "id" UUID NOT NULL,
    "packId" UUID NOT NULL,
    "tenantId" UUID NOT NULL,
    "kind" "ReserveKind" NOT NULL,
    "subject" UUID NOT NULL,
    "jobId" UUID,
    "reservedAt" TIMESTAMP(3) NOT NULL,
    "heartbeatAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "QuotaReserve_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "QuotaSpend" (
    "id" BIGSERIAL NOT NULL,
    "reserveId" UUID NOT NULL,
    "packId" UUID NOT NULL,
    "tenantId" UUID NOT NULL,
    "kind" "ReserveKind" NOT NULL,
    "subject" UUID NOT NULL,
    "jobId" UUID,
    "reservedAt" TIMESTAMP(3) NOT NULL,
    "spentAt" TIMESTAMP(3) NOT NULL,
    "late" BOOLEAN NOT NULL DEFAULT false,

    CONSTRAINT "QuotaSpend_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ReserveReclaim" (
    "id" BIGSERIAL NOT NULL,
    "reserveId" UUID NOT NULL,
    "packId" UUID NOT NULL,
    "tenantId" UUID NOT NULL,
    "kind" "ReserveKind" NOT NULL,
    "subject" UUID NOT NULL,
    "jobId" UUID,
    "reservedAt" TIMESTAMP(3) NOT NULL,
    "heartbeatAt" TIMESTAMP(3) NOT NULL,
    "reclaimedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "ReserveReclaim_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "LateRelease" (
    "id" BIGSERIAL NOT NULL,
    "reserveId" UUID NOT NULL,
    "packId" UUID NOT NULL,
    "tenantId" UUID NOT NULL,
    "kind" "ReserveKind" NOT NULL,
    "subject" UUID NOT NULL,
    "jobId" UUID,
    "outcome" "LateReleaseOutcome" NOT NULL,
    "resolution" "LateReleaseResolution" NOT NULL,
    "reservedAt" TIMESTAMP(3) NOT NULL,
    "reclaimedAt" TIMESTAMP(3) NOT NULL,
    "releasedAt" TIMESTAMP(3) NOT NULL,
    "debtSettledAt" TIMESTAMP(3),

    CONSTRAINT "LateRelease_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Ad" (
    "id" UUID NOT NULL,
    "tenantId" UUID NOT NULL,
    "params" JSONB NOT NULL DEFAULT '{}',
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Ad_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "CardImage" (
    "id" BIGSERIAL NOT NULL,
    "adId" UUID NOT NULL,
    "jobId" UUID,
    "reserveId" UUID NOT NULL,
    "kind" "ReserveKind" NOT NULL,
    "passes" INTEGER NOT NULL,
    "providerJobId" TEXT NOT NULL,
    "contentType" TEXT NOT NULL,
    "sizeBytes" INTEGER NOT NULL,
    "content" BYTEA NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "CardImage_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "QuotaPack_tenantId_key" ON "QuotaPack"("tenantId");

-- CreateIndex
CREATE INDEX "QuotaReserve_reservedAt_idx" ON "QuotaReserve"("reservedAt");

-- CreateIndex
CREATE INDEX "QuotaReserve_packId_idx" ON "QuotaReserve"("packId");

-- CreateIndex
CREATE INDEX "QuotaReserve_subject_idx" ON "QuotaReserve"("subject");

-- CreateIndex
CREATE UNIQUE INDEX "QuotaSpend_reserveId_key" ON "QuotaSpend"("reserveId");

-- CreateIndex
CREATE INDEX "QuotaSpend_packId_idx" ON "QuotaSpend"("packId");

-- CreateIndex
CREATE INDEX "QuotaSpend_subject_kind_idx" ON "QuotaSpend"("subject", "kind");

-- CreateIndex
CREATE UNIQUE INDEX "ReserveReclaim_reserveId_key" ON "ReserveReclaim"("reserveId");

-- CreateIndex
CREATE INDEX "ReserveReclaim_reclaimedAt_idx" ON "ReserveReclaim"("reclaimedAt");

-- CreateIndex
CREATE UNIQUE INDEX "LateRelease_reserveId_key" ON "LateRelease"("reserveId");

-- CreateIndex
CREATE INDEX "LateRelease_releasedAt_idx" ON "LateRelease"("releasedAt");

-- CreateIndex
CREATE INDEX "Ad_tenantId_idx" ON "Ad"("tenantId");

-- CreateIndex
CREATE UNIQUE INDEX "CardImage_reserveId_key" ON "CardImage"("reserveId");

-- CreateIndex
CREATE INDEX "CardImage_adId_createdAt_idx" ON "CardImage"("adId", "createdAt");

-- AddForeignKey
ALTER TABLE "QuotaPack" ADD CONSTRAINT "QuotaPack_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "QuotaReserve" ADD CONSTRAINT "QuotaReserve_packId_fkey" FOREIGN KEY ("packId") REFERENCES "QuotaPack"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "QuotaReserve" ADD CONSTRAINT "QuotaReserve_subject_fkey" FOREIGN KEY ("subject") REFERENCES "Ad"("id") ON DELETE NO ACTION ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "QuotaSpend" ADD CONSTRAINT "QuotaSpend_packId_fkey" FOREIGN KEY ("packId") REFERENCES "QuotaPack"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ReserveReclaim" ADD CONSTRAINT "ReserveReclaim_packId_fkey" FOREIGN KEY ("packId") REFERENCES "QuotaPack"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "LateRelease" ADD CONSTRAINT "LateRelease_packId_fkey" FOREIGN KEY ("packId") REFERENCES "QuotaPack"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Ad" ADD CONSTRAINT "Ad_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "CardImage" ADD CONSTRAINT "CardImage_adId_fkey" FOREIGN KEY ("adId") REFERENCES "Ad"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- A pack can never be overdrawn nor refunded past its size, whatever code runs against it.
ALTER TABLE "QuotaPack" ADD CONSTRAINT "QuotaPack_remaining_within_size" CHECK ("size" >= 0 AND "remaining" >= 0 AND "remaining" <= "size");
