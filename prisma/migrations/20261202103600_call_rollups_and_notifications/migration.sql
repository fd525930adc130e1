-- Latency buckets: log-spaced, 6 per decade from 10 ms; bucket 0 holds everything under ~14.7 ms,
-- bucket 33 everything from ~36 min. Must match lib/modelcalls/buckets.ts (a test checks).
CREATE FUNCTION bounded_latency_bucket(ms integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT least(33, greatest(0, floor(6 * log(10::numeric, greatest(ms, 10)::numeric / 10))::integer))
$$;

-- Every recorded call is counted in its hour × bucket row, in the same transaction as the insert.
CREATE FUNCTION bounded_model_call_rollup() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "ModelCallRollup" ("hour", "type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs")
  VALUES (date_trunc('hour', NEW."startedAt"), NEW."type", coalesce(NEW."queue", ''), coalesce(NEW."jobKind", ''), NEW."model",
          NEW."outcome", bounded_latency_bucket(NEW."durationMs"), 1, NEW."durationMs", NEW."durationMs")
  ON CONFLICT ("hour", "type", "queue", "jobKind", "model", "outcome", "bucket") DO UPDATE
    SET "count" = "ModelCallRollup"."count" + 1,
        "sumMs" = "ModelCallRollup"."sumMs" + EXCLUDED."sumMs",
        "maxMs" = greatest("ModelCallRollup"."maxMs", EXCLUDED."maxMs");
  RETURN NULL;
END
$$;

CREATE TRIGGER model_call_rollup AFTER INSERT ON "ModelCall"
  FOR EACH ROW EXECUTE FUNCTION bounded_model_call_rollup();

-- Reference data cached in every process: any change, however made, tells them to reload.
CREATE FUNCTION bounded_notify_category_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('bounded_category_changed', '');
  RETURN NULL;
END
$$;

CREATE TRIGGER category_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON "Category"
  FOR EACH STATEMENT EXECUTE FUNCTION bounded_notify_category_changed();
