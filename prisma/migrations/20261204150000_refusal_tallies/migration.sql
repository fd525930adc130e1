-- Refused calls without credentials, one row per address, route, status and minute with a count:
-- a flood of anonymous 401s adds to a counter instead of writing a row per request into the
-- append-only audit log (which refuses updates).
CREATE TABLE "AuditRefusalTally" (
    "address" TEXT NOT NULL,
    "route" TEXT NOT NULL,
    "status" INTEGER NOT NULL,
    "minute" TIMESTAMP(3) NOT NULL,
    "count" INTEGER NOT NULL DEFAULT 0,
    "reason" TEXT NOT NULL,
    "lastAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "AuditRefusalTally_pkey" PRIMARY KEY ("address","route","status","minute")
);

CREATE INDEX "AuditRefusalTally_minute_idx" ON "AuditRefusalTally"("minute");
