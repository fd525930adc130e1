-- AlterEnum
ALTER TYPE "CallType" ADD VALUE 'item';

-- AlterTable
ALTER TABLE "ModelCall" ADD COLUMN "batchSize" INTEGER NOT NULL DEFAULT 1;

-- CreateTable
CREATE TABLE "JobItem" (
    "jobId" UUID NOT NULL,
    "item" INTEGER NOT NULL,
    "attempt" INTEGER NOT NULL,
    "ok" BOOLEAN NOT NULL,
    "committedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "JobItem_pkey" PRIMARY KEY ("jobId","item")
);

-- AddForeignKey
ALTER TABLE "JobItem" ADD CONSTRAINT "JobItem_jobId_fkey" FOREIGN KEY ("jobId") REFERENCES "Job"("id") ON DELETE CASCADE ON UPDATE CASCADE;
