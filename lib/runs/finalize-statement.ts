/**
 * The statements that end a run, as SQL text with positional parameters: the job runtime runs
 * them through Prisma (`finalizeJob` in ./finalize.ts) and the watchdog thread through `pg`
 * (./watchdog-thread.ts), so the hard-limit path and the normal path write the same row
 * and the same timeline event. Only a type import: a worker thread loads it without a database client.
 */
import type { FinalRow } from "@/lib/jobs/messages";

/** What the finalizing statement returns: the row as finalized, and whether the message went with it. */
export type FinalizedRow = FinalRow & { status: string; parentId: string | null; written: boolean };

export interface Statement {
  text: string;
  values: unknown[];
}

export interface FinalizeInput {
  jobId: string;
  attempt: number;
  /** The status to write; `completed` becomes `completed_with_errors` when any item failed. */
  status: string;
  terminal: boolean;
  /** Only a row in one of these statuses is finalized. */
  from: readonly string[];
  result: string | null;
  /**
   * The message known before the statement runs, and the row it assumes (none: it holds for any
   * row). Null: the message needs the row as finalized (`finalMessageStatement` follows).
   */
  early: { message: string; known?: FinalRow } | null;
}

/**
 * One statement flips the status (fencing every later commit of this attempt at once), if
 * `attempt` is still current and the row is in one of `from`; when the message is known by then —
 * a string, or one built from a `known` row that is still exactly the row — it writes the message
 * and the timeline event too. Returns no row when the row was not this attempt's to finalize.
 */
export function finalizeStatement(f: FinalizeInput): Statement {
  const k = f.early?.known;
  // $8: 'always' (a plain message), 'if_unchanged' (built from `known`), 'never' (needs the final row).
  const mode = f.early === null ? "never" : k ? "if_unchanged" : "always";
  // Reads columns the statement does not write, so RETURNING repeats the answer of the SET.
  const written = `($8::text = 'always' OR ($8::text = 'if_unchanged' AND kind = $9::text AND total IS NOT DISTINCT FROM $10::int
    AND processed = $11::int AND failed = $12::int AND cursor = $13::int AND "budgetSoftMs" = $14::int AND "budgetHardMs" = $15::int))`;
  return {
    text: `
    WITH done AS (
      UPDATE "Job"
      SET status = (CASE WHEN $3::text = 'completed' AND failed > 0 THEN 'completed_with_errors' ELSE $3::text END)::"JobStatus",
          message = CASE WHEN ${written} THEN $5::text ELSE message END,
          result = coalesce($6::jsonb, result),
          "finishedAt" = CASE WHEN $7::boolean THEN now() AT TIME ZONE 'UTC' ELSE NULL END,
          "heartbeatAt" = now() AT TIME ZONE 'UTC',
          "updatedAt" = now() AT TIME ZONE 'UTC'
      WHERE id = $1::uuid AND attempt = $2::int AND status::text = ANY($4::text[])
      RETURNING status::text AS status, kind, total, processed, failed, cursor, "budgetSoftMs", "budgetHardMs", "parentId"::text AS "parentId", ${written} AS written
    ), event AS (
      INSERT INTO "JobEvent" ("jobId", type, attempt, message, at)
      SELECT $1::uuid, status, $2::int, $5::text, now() AT TIME ZONE 'UTC' FROM done WHERE written
    )
    SELECT * FROM done`,
    values: [
      f.jobId,
      f.attempt,
      f.status,
      [...f.from],
      f.early?.message ?? null,
      f.result,
      f.terminal,
      mode,
      k?.kind ?? null,
      k?.total ?? null,
      k?.processed ?? null,
      k?.failed ?? null,
      k?.cursor ?? null,
      k?.budgetSoftMs ?? null,
      k?.budgetHardMs ?? null,
    ],
  };
}

/**
 * The message of a row finalized without one (its counts were not known in advance), and its
 * timeline event. The status flip already fenced the attempt's commits: the counts it was built
 * from are final.
 */
export function finalMessageStatement(jobId: string, attempt: number, status: string, message: string): Statement {
  return {
    text: `
    WITH updated AS (
      UPDATE "Job" SET message = $3::text
      WHERE id = $1::uuid AND attempt = $2::int AND status = $4::text::"JobStatus" RETURNING id
    )
    INSERT INTO "JobEvent" ("jobId", type, attempt, message, at)
    SELECT id, $4::text, $2::int, $3::text, now() AT TIME ZONE 'UTC' FROM updated`,
    values: [jobId, attempt, message, status],
  };
}
