-- Calls counted per ISO week (starting Monday, UTC), kept by the same trigger as the hour and day
-- counts: the month view reads about five week rows a cell and the days before its first Monday,
-- not thirty day rows, so it stays fast however busy the days are.
CREATE TABLE "ModelCallRollupWeek" (
    "week" DATE NOT NULL,
    "type" "CallType" NOT NULL,
    "queue" TEXT NOT NULL,
    "jobKind" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "outcome" "ModelCallOutcome" NOT NULL,
    "bucket" INTEGER NOT NULL,
    "count" INTEGER NOT NULL,
    "sumMs" BIGINT NOT NULL,
    "maxMs" INTEGER NOT NULL,

    CONSTRAINT "ModelCallRollupWeek_pkey" PRIMARY KEY ("week","type","queue","jobKind","model","outcome","bucket")
);

-- CreateIndex
CREATE INDEX "ModelCallRollupWeek_type_week_idx" ON "ModelCallRollupWeek"("type", "week");

-- The weeks recorded so far, from the day counts.
INSERT INTO "ModelCallRollupWeek" ("week", "type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs")
SELECT date_trunc('week', "day")::date, "type", "queue", "jobKind", "model", "outcome", "bucket",
       sum("count")::int, sum("sumMs")::bigint, max("maxMs")
FROM "ModelCallRollupDay"
GROUP BY 1, 2, 3, 4, 5, 6, 7;

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
  INSERT INTO "ModelCallRollupWeek" ("week", "type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs")
  VALUES (date_trunc('week', NEW."startedAt")::date, NEW."type", coalesce(NEW."queue", ''), coalesce(NEW."jobKind", ''), NEW."model",
          NEW."outcome", b, 1, NEW."durationMs", NEW."durationMs")
  ON CONFLICT ("week", "type", "queue", "jobKind", "model", "outcome", "bucket") DO UPDATE
    SET "count" = "ModelCallRollupWeek"."count" + 1,
        "sumMs" = "ModelCallRollupWeek"."sumMs" + EXCLUDED."sumMs",
        "maxMs" = greatest("ModelCallRollupWeek"."maxMs", EXCLUDED."maxMs");
  IF NEW."type" = 'model' AND NEW."outcome" = 'ok' AND NEW."promptTokens" IS NOT NULL AND NEW."jobKind" IS NOT NULL THEN
    INSERT INTO "KindFiguresDay" ("day", "jobKind", "tokens", "tokenItems")
    VALUES (NEW."startedAt"::date, NEW."jobKind", NEW."promptTokens" + coalesce(NEW."completionTokens", 0), NEW."batchSize")
    ON CONFLICT ("day", "jobKind") DO UPDATE
      SET "tokens" = "KindFiguresDay"."tokens" + EXCLUDED."tokens",
          "tokenItems" = "KindFiguresDay"."tokenItems" + EXCLUDED."tokenItems";
  END IF;
  RETURN NULL;
END
$$;
