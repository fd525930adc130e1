import { db } from "@/lib/db/client";
import { logger } from "@/lib/log";

const log = logger("item-costs");

/** Samples kept before they are written: one statement per this many items, not one per item. */
const FLUSH_EVERY = 200;

/**
 * What an item really costs, end to end: from its dispatch to its commit — its calls, its waits
 * for a provider slot and its writes, which do not shrink with the time scale. Rolled up like the
 * calls themselves (type `item` in `ModelCallRollup`, `ModelCallRollupDay` and `ModelCallRollupWeek`, real milliseconds
 * per log bucket), so the split plan, the budget risk and projections read the p99 of a whole
 * item with the same queries as a call's. Written in batches, never on an item's path: a lost
 * sample must not fail an item.
 */
export class ItemCosts {
  private ms: number[] = [];
  private ok: boolean[] = [];
  private writes = new Set<Promise<void>>();

  constructor(private readonly scope: { queue: string; kind: string }) {}

  add(durationMs: number, ok: boolean): void {
    if (!Number.isFinite(durationMs)) return;
    this.ms.push(Math.max(0, Math.round(durationMs)));
    this.ok.push(ok);
    if (this.ms.length >= FLUSH_EVERY) this.write();
  }

  /** Writes what is left and waits for every write started so far. */
  async flush(): Promise<void> {
    this.write();
    await Promise.all([...this.writes]);
  }

  private write(): void {
    if (this.ms.length === 0) return;
    const ms = this.ms.splice(0);
    const ok = this.ok.splice(0);
    const { queue, kind } = this.scope;
    const written: Promise<void> = db().$executeRaw`
        WITH s AS (
          SELECT bounded_latency_bucket(d) AS bucket, d, (CASE WHEN good THEN 'ok' ELSE 'error' END)::"ModelCallOutcome" AS outcome
          FROM unnest(${ms}::int[], ${ok}::boolean[]) AS t(d, good)
        ), g AS (
          SELECT bucket, outcome, count(*)::int AS n, sum(d)::bigint AS total, max(d)::int AS longest FROM s GROUP BY bucket, outcome
        ), hourly AS (
          INSERT INTO "ModelCallRollup" ("hour", "type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs")
          SELECT date_trunc('hour', now() AT TIME ZONE 'UTC'), 'item', ${queue}, ${kind}, '', outcome, bucket, n, total, longest FROM g
          ON CONFLICT ("hour", "type", "queue", "jobKind", "model", "outcome", "bucket") DO UPDATE
            SET "count" = "ModelCallRollup"."count" + EXCLUDED."count",
                "sumMs" = "ModelCallRollup"."sumMs" + EXCLUDED."sumMs",
                "maxMs" = greatest("ModelCallRollup"."maxMs", EXCLUDED."maxMs")
        ), daily AS (
          INSERT INTO "ModelCallRollupDay" ("day", "type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs")
          SELECT (now() AT TIME ZONE 'UTC')::date, 'item', ${queue}, ${kind}, '', outcome, bucket, n, total, longest FROM g
          ON CONFLICT ("day", "type", "queue", "jobKind", "model", "outcome", "bucket") DO UPDATE
            SET "count" = "ModelCallRollupDay"."count" + EXCLUDED."count",
                "sumMs" = "ModelCallRollupDay"."sumMs" + EXCLUDED."sumMs",
                "maxMs" = greatest("ModelCallRollupDay"."maxMs", EXCLUDED."maxMs")
        )
        INSERT INTO "ModelCallRollupWeek" ("week", "type", "queue", "jobKind", "model", "outcome", "bucket", "count", "sumMs", "maxMs")
        SELECT date_trunc('week', now() AT TIME ZONE 'UTC')::date, 'item', ${queue}, ${kind}, '', outcome, bucket, n, total, longest FROM g
        ON CONFLICT ("week", "type", "queue", "jobKind", "model", "outcome", "bucket") DO UPDATE
          SET "count" = "ModelCallRollupWeek"."count" + EXCLUDED."count",
              "sumMs" = "ModelCallRollupWeek"."sumMs" + EXCLUDED."sumMs",
              "maxMs" = greatest("ModelCallRollupWeek"."maxMs", EXCLUDED."maxMs")`
      .then(
        () => undefined,
        (err: unknown) => log.warn({ err, queue, kind, samples: ms.length }, "could not record item durations"),
      )
      .finally(() => this.writes.delete(written));
    this.writes.add(written);
  }
}
