-- The batch lane (lib/runs/batch-lane.ts): a job whose budget leaves room sends its rows that still
-- need the model to the provider's Batch API. One JobBatch row per job holds the decision, the
-- batch and the wall-clock points it is held to; model calls say which lane they were made in.
ALTER TABLE "ModelCall" ADD COLUMN "lane" TEXT NOT NULL DEFAULT 'sync';

CREATE TABLE "JobBatch" (
    "jobId" UUID NOT NULL,
    "batchId" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "rows" INTEGER NOT NULL,
    "completed" INTEGER NOT NULL DEFAULT 0,
    "failed" INTEGER NOT NULL DEFAULT 0,
    "submittedAt" TIMESTAMP(3) NOT NULL,
    "expectedBy" TIMESTAMP(3) NOT NULL,
    "deadlineAt" TIMESTAMP(3) NOT NULL,
    "lastMomentAt" TIMESTAMP(3) NOT NULL,
    "decision" TEXT NOT NULL,
    "endedAt" TIMESTAMP(3),
    "fallback" TEXT,
    "costRecordedAt" TIMESTAMP(3),

    CONSTRAINT "JobBatch_pkey" PRIMARY KEY ("jobId")
);

CREATE UNIQUE INDEX "JobBatch_batchId_key" ON "JobBatch"("batchId");
CREATE INDEX "JobBatch_status_endedAt_idx" ON "JobBatch"("status", "endedAt");

ALTER TABLE "JobBatch" ADD CONSTRAINT "JobBatch_jobId_fkey" FOREIGN KEY ("jobId") REFERENCES "Job"("id") ON DELETE CASCADE ON UPDATE CASCADE;
