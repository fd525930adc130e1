import { db } from "@/lib/db/client";

/** One cell of the call rollups: `count` calls (or items) of `ms` each, at `at`. */
export interface RollupCell {
  at: Date;
  type: "item" | "model" | "ocr" | "tool";
  queue: string;
  kind: string;
  model: string;
  count: number;
  ms: number;
}

/** The three call rollups and each one's period of a moment, as the trigger and `lib/runs/item-costs.ts` key them. */
const ROLLUPS = [
  { table: "ModelCallRollup", period: "hour", of: "date_trunc('hour', at)" },
  { table: "ModelCallRollupDay", period: "day", of: "at::date" },
  { table: "ModelCallRollupWeek", period: "week", of: "date_trunc('week', at)::date" },
] as const;

/**
 * Writes measurements into every call rollup — hour, day and week — as production records them, so
 * whichever rollup a read takes a window from (hour rows for part-days, day and week rows for whole
 * ones) sees them.
 */
export async function recordRollups(cells: RollupCell[]): Promise<void> {
  for (const { table, period, of } of ROLLUPS) {
    await db().$executeRawUnsafe(
      `INSERT INTO "${table}" ("${period}", type, queue, "jobKind", model, outcome, bucket, count, "sumMs", "maxMs")
       SELECT ${of}, type::"CallType", queue, kind, model, 'ok', bounded_latency_bucket(ms), count, count::bigint * ms, ms
       FROM unnest($1::timestamp[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[])
         AS c(at, type, queue, kind, model, count, ms)`,
      cells.map((c) => c.at.toISOString().replace("Z", "")),
      cells.map((c) => c.type),
      cells.map((c) => c.queue),
      cells.map((c) => c.kind),
      cells.map((c) => c.model),
      cells.map((c) => c.count),
      cells.map((c) => c.ms),
    );
  }
}

/** Removes a kind's measurements of the given types from every call rollup. */
export async function forgetRollups(kind: string, types: RollupCell["type"][]): Promise<void> {
  for (const { table } of ROLLUPS)
    await db().$executeRawUnsafe(
      `DELETE FROM "${table}" WHERE "jobKind" = $1 AND type::text = ANY($2::text[])`,
      kind,
      types,
    );
}
