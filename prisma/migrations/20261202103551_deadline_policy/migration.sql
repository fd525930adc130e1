-- CreateEnum
CREATE TYPE "InvoiceStatus" AS ENUM ('open', 'overdue', 'paid');

-- CreateEnum
CREATE TYPE "CallType" AS ENUM ('model', 'tool', 'ocr');

-- AlterTable
ALTER TABLE "Job" ADD COLUMN     "attemptStartedAt" TIMESTAMP(3),
ADD COLUMN     "params" JSONB,
ADD COLUMN     "result" JSONB;

-- AlterTable
ALTER TABLE "ModelCall" ADD COLUMN     "type" "CallType" NOT NULL DEFAULT 'model';

-- CreateTable
CREATE TABLE "JobFile" (
    "id" BIGSERIAL NOT NULL,
    "jobId" UUID NOT NULL,
    "index" INTEGER NOT NULL,
    "filename" TEXT NOT NULL,
    "contentType" TEXT NOT NULL,
    "sizeBytes" INTEGER NOT NULL,
    "content" BYTEA NOT NULL,
    "text" TEXT,
    "summary" TEXT,

    CONSTRAINT "JobFile_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Invoice" (
    "id" UUID NOT NULL,
    "tenantId" UUID NOT NULL,
    "number" TEXT NOT NULL,
    "amountMinor" BIGINT NOT NULL,
    "currency" TEXT NOT NULL,
    "dueDate" DATE NOT NULL,
    "status" "InvoiceStatus" NOT NULL DEFAULT 'open',
    "overdueAt" TIMESTAMP(3),
    "reminder" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Invoice_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ModelCallRollup" (
    "hour" TIMESTAMP(3) NOT NULL,
    "type" "CallType" NOT NULL,
    "queue" TEXT NOT NULL,
    "jobKind" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "outcome" "ModelCallOutcome" NOT NULL,
    "bucket" INTEGER NOT NULL,
    "count" INTEGER NOT NULL,
    "sumMs" BIGINT NOT NULL,
    "maxMs" INTEGER NOT NULL,

    CONSTRAINT "ModelCallRollup_pkey" PRIMARY KEY ("hour","type","queue","jobKind","model","outcome","bucket")
);

-- CreateIndex
CREATE UNIQUE INDEX "JobFile_jobId_index_key" ON "JobFile"("jobId", "index");

-- CreateIndex
CREATE INDEX "Invoice_status_dueDate_idx" ON "Invoice"("status", "dueDate");

-- CreateIndex
CREATE UNIQUE INDEX "Invoice_tenantId_number_key" ON "Invoice"("tenantId", "number");

-- CreateIndex
CREATE INDEX "ModelCallRollup_type_hour_idx" ON "ModelCallRollup"("type", "hour");

-- AddForeignKey
ALTER TABLE "JobFile" ADD CONSTRAINT "JobFile_jobId_fkey" FOREIGN KEY ("jobId") REFERENCES "Job"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Invoice" ADD CONSTRAINT "Invoice_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
