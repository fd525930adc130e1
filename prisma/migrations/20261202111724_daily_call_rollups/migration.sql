-- CreateTable
CREATE TABLE "ModelCallRollupDay" (
    "day" DATE NOT NULL,
    "type" "CallType" NOT NULL,
    "queue" TEXT NOT NULL,
    "jobKind" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "outcome" "ModelCallOutcome" NOT NULL,
    "bucket" INTEGER NOT NULL,
    "count" INTEGER NOT NULL,
    "sumMs" BIGINT NOT NULL,
    "maxMs" INTEGER NOT NULL,

    CONSTRAINT "ModelCallRollupDay_pkey" PRIMARY KEY ("day","type","queue","jobKind","model","outcome","bucket")
);

-- CreateIndex
CREATE INDEX "ModelCallRollupDay_type_day_idx" ON "ModelCallRollupDay"("type", "day");

-- Keep the daily counts in the same trigger as the hourly ones, and fill them from the hourly
-- rows recorded so far.
CREATE OR REPLACE FUNCTION bounded_model_call_rollup() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  b integer := bounded_latency_bucket(NEW."durationMs");
BEGIN
  INSERT INTO "ModelCallRollup" ("hour", "type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs")
  VALUES (date_trunc('hour', NEW."startedAt"), NEW."type", coalesce(NEW."queue", ''), coalesce(NEW."jobKind", ''), NEW."model",
          NEW."outcome", b, 1, NEW."durationMs", NEW."durationMs")
  ON CONFLICT ("hour", "type", "queue", "jobKind", "model", "outcome", "bucket") DO UPDATE
    SET "count" = "ModelCallRollup"."count" + 1,
        "sumMs" = "ModelCallRollup"."sumMs" + EXCLUDED."sumMs",
        "maxMs" = greatest("ModelCallRollup"."maxMs", EXCLUDED."maxMs");
  INSERT INTO "ModelCallRollupDay" ("day", "type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs")
  VALUES (NEW."startedAt"::date, NEW."type", coalesce(NEW."queue", ''), coalesce(NEW."jobKind", ''), NEW."model",
          NEW."outcome", b, 1, NEW."durationMs", NEW."durationMs")
  ON CONFLICT ("day", "type", "queue", "jobKind", "model", "outcome", "bucket") DO UPDATE
    SET "count" = "ModelCallRollupDay"."count" + 1,
        "sumMs" = "ModelCallRollupDay"."sumMs" + EXCLUDED."sumMs",
        "maxMs" = greatest("ModelCallRollupDay"."maxMs", EXCLUDED."maxMs");
  RETURN NULL;
END
$$;

INSERT INTO "ModelCallRollupDay" ("day", "type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs")
SELECT "hour"::date, "type", "queue", "jobKind", "model", "outcome", "bucket", sum("count")::integer, sum("sumMs"), max("maxMs")
FROM "ModelCallRollup"
GROUP BY 1, 2, 3, 4, 5, 6, 7;
