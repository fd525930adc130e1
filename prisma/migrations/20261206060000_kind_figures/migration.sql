-- What projecting a job of a kind needs of its history beyond the call rollups, per UTC day, kept
-- by triggers as it happens: a job's start reads a week of these rows instead of summing every
-- model call and every upload of the week (a cost that grew with the history).
CREATE TABLE "KindFiguresDay" (
    "day" DATE NOT NULL,
    "jobKind" TEXT NOT NULL,
    "tokens" BIGINT NOT NULL DEFAULT 0,
    "tokenItems" BIGINT NOT NULL DEFAULT 0,
    "uploadBytes" BIGINT NOT NULL DEFAULT 0,
    "uploadItems" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "KindFiguresDay_pkey" PRIMARY KEY ("day","jobKind")
);

-- The call rollups' trigger also counts the tokens of a job's answered model calls.
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

-- An upload counts its bytes and its job's items on the day its job was created.
CREATE FUNCTION bounded_upload_figures() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "KindFiguresDay" ("day", "jobKind", "uploadBytes", "uploadItems")
  SELECT j."createdAt"::date, j.kind, NEW."sizeBytes", j.total FROM "Job" j WHERE j.id = NEW."jobId" AND j.total > 0
  ON CONFLICT ("day", "jobKind") DO UPDATE
    SET "uploadBytes" = "KindFiguresDay"."uploadBytes" + EXCLUDED."uploadBytes",
        "uploadItems" = "KindFiguresDay"."uploadItems" + EXCLUDED."uploadItems";
  RETURN NULL;
END
$$;

CREATE TRIGGER upload_figures AFTER INSERT ON "Upload"
  FOR EACH ROW EXECUTE FUNCTION bounded_upload_figures();

-- The last eight days recorded so far (a projection reads seven).
INSERT INTO "KindFiguresDay" ("day", "jobKind", "tokens", "tokenItems", "uploadBytes", "uploadItems")
SELECT day, "jobKind", sum(tokens), sum("tokenItems"), sum("uploadBytes"), sum("uploadItems") FROM (
  SELECT "startedAt"::date AS day, "jobKind", sum("promptTokens" + coalesce("completionTokens", 0)) AS tokens,
         sum("batchSize") AS "tokenItems", 0 AS "uploadBytes", 0 AS "uploadItems"
  FROM "ModelCall"
  WHERE type = 'model' AND outcome = 'ok' AND "promptTokens" IS NOT NULL AND "jobKind" IS NOT NULL
    AND "startedAt" >= (now() AT TIME ZONE 'UTC') - interval '8 days'
  GROUP BY 1, 2
  UNION ALL
  SELECT j."createdAt"::date, j.kind, 0, 0, sum(u."sizeBytes"), sum(j.total)
  FROM "Job" j JOIN "Upload" u ON u."jobId" = j.id
  WHERE j.total > 0 AND j."createdAt" >= (now() AT TIME ZONE 'UTC') - interval '8 days'
  GROUP BY 1, 2
) f
GROUP BY 1, 2;
