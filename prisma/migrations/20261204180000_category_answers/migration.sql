-- Categorisation answers kept per tenant (lib/answers): one stored answer per question key, and
-- per committed row of a job where its category came from (its own call, an earlier row of the
-- job, or a stored answer), written with the row's commit.
CREATE TYPE "AnswerSource" AS ENUM ('model', 'job', 'cache');

CREATE TABLE "CategoryAnswer" (
    "id" BIGSERIAL NOT NULL,
    "tenantId" UUID NOT NULL,
    "key" CHAR(64) NOT NULL,
    "slug" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "promptVersion" INTEGER NOT NULL,
    "promptTokens" INTEGER NOT NULL,
    "completionTokens" INTEGER NOT NULL,
    "callShare" DOUBLE PRECISION NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "hits" INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT "CategoryAnswer_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "CategoryAnswer_tenantId_key_key" ON "CategoryAnswer"("tenantId", "key");
CREATE INDEX "CategoryAnswer_expiresAt_idx" ON "CategoryAnswer"("expiresAt");
ALTER TABLE "CategoryAnswer" ADD CONSTRAINT "CategoryAnswer_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "CategoryAnswerUse" (
    "jobId" UUID NOT NULL,
    "row" INTEGER NOT NULL,
    "jobKind" TEXT NOT NULL,
    "source" "AnswerSource" NOT NULL,
    "model" TEXT NOT NULL,
    "promptTokens" INTEGER NOT NULL,
    "completionTokens" INTEGER NOT NULL,
    "callShare" DOUBLE PRECISION NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "CategoryAnswerUse_pkey" PRIMARY KEY ("jobId", "row")
);
CREATE INDEX "CategoryAnswerUse_createdAt_idx" ON "CategoryAnswerUse"("createdAt");
ALTER TABLE "CategoryAnswerUse" ADD CONSTRAINT "CategoryAnswerUse_jobId_fkey" FOREIGN KEY ("jobId") REFERENCES "Job"("id") ON DELETE CASCADE ON UPDATE CASCADE;
