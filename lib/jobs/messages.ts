import { formatCount } from "@/lib/format/number";
import { formatDays, formatSeconds } from "@/lib/format/duration";
import { env } from "@/lib/env";
import { kindSpec } from "@/lib/catalog/catalog";

/**
 * The words a person reads when a run ends: counts of committed items and the budget that ended
 * it. Pure (no database), so the job runtime, the reaper and the watchdog thread say the same
 * thing about the same row.
 */

/** The row as a finalizer sees it: what a message may read. */
export interface FinalRow {
  kind: string;
  total: number | null;
  processed: number;
  failed: number;
  cursor: number;
  budgetSoftMs: number;
  budgetHardMs: number;
}

/** Just the columns a message may read, whatever else the row carries. */
export function finalRowOf({ kind, total, processed, failed, cursor, budgetSoftMs, budgetHardMs }: FinalRow): FinalRow {
  return { kind, total, processed, failed, cursor, budgetSoftMs, budgetHardMs };
}

export function countLabel(n: number, noun: string): string {
  return `${formatCount(n)} ${noun}${n === 1 ? "" : "s"}`;
}

/** What one item of this kind is called ("row", "page"), or "item" for a kind the catalog does not know. */
export function nounOf(kind: string): string {
  return kindSpec(kind)?.noun ?? "item";
}

/** "340 of 1,772 rows", from the committed counts. */
export function progressPhrase(row: Pick<FinalRow, "kind" | "total" | "processed" | "failed">): string {
  const done = row.processed + row.failed;
  const noun = nounOf(row.kind);
  return row.total !== null ? `${formatCount(done)} of ${countLabel(row.total, noun)}` : countLabel(done, noun);
}

/** A run that returned without a message of its own. */
export function completedMessage(row: FinalRow): string {
  const noun = nounOf(row.kind);
  const done = row.processed + row.failed;
  if (row.failed === 0) return `Processed all ${countLabel(done, noun)}.`;
  return `Processed ${formatCount(row.processed)} of ${countLabel(done, noun)}; ${countLabel(row.failed, noun)} failed (see the list).`;
}

/** The soft limit ended the run: what was committed, the budget, and the kind's advice. */
export function timedOutMessage(row: FinalRow): string {
  const advice = kindSpec(row.kind)?.advice ?? "";
  return `Timed out after ${progressPhrase(row)} (budget ${formatSeconds(row.budgetSoftMs)}). ${advice}`.trim();
}

/**
 * The hard limit stopped the run. `ignoredSignal`: the run kept going past its soft limit (the
 * runtime stopped waiting for it); `blockedWorker`: it blocked its worker's event loop, and the
 * watchdog thread restarted the process.
 */
export function killedMessage(row: FinalRow, cause: "ignored_signal" | "blocked_worker"): string {
  const why =
    cause === "ignored_signal"
      ? `the job did not stop at its soft limit of ${formatSeconds(row.budgetSoftMs)}`
      : "the job blocked its worker, which was restarted";
  return `Stopped at the hard limit after ${progressPhrase(row)} (hard limit ${formatSeconds(row.budgetHardMs)}): ${why}. Nothing it does from now on is saved.`;
}

/** Where a finished job's message points its reader while its failures are kept; the retention pass takes it out with them. */
export const SEE_THE_LIST = " (see the list below)";

/**
 * What every page, API answer and download of a job whose detail the retention pass removed
 * (lib/retention) says in place of what is gone: when, and after how long.
 */
export function detailRemovedMessage(prunedAt: Date, days = env().BOUNDED_RETAIN_JOB_DETAIL_DAYS): string {
  return `This job's details (the record of each row, its failed rows, its timeline and the uploaded file) were removed on ${prunedAt.toISOString().slice(0, 10)}, ${formatDays(days)} after it ended; its outcome and counts are kept.`;
}

/** What the pages and downloads of an import whose results its tenant's retention removed say (lib/retention). */
export function resultsRemovedMessage(prunedAt: Date, days: number | null): string {
  const after = days === null ? "" : `, ${formatDays(days)} after it ended, as this account keeps them`;
  return `This import's imported rows were removed on ${prunedAt.toISOString().slice(0, 10)}${after}.`;
}

/** Everything retention removed of a job, in one sentence or two; null while it keeps everything. */
export function removedByRetentionMessage(row: {
  detailPrunedAt: Date | null;
  resultsPrunedAt: Date | null;
  resultsRetainDays: number | null;
}): string | null {
  const parts = [
    row.detailPrunedAt ? detailRemovedMessage(row.detailPrunedAt) : null,
    row.resultsPrunedAt ? resultsRemovedMessage(row.resultsPrunedAt, row.resultsRetainDays) : null,
  ].filter((p): p is string => p !== null);
  return parts.length ? parts.join(" ") : null;
}

/**
 * What a progress link that opens no job is answered (the API, the stream, the downloads): the
 * address may be wrong, or the job's row is gone (lib/retention, a tenant deleted).
 */
export function progressLinkNotFoundMessage(jobsDays = env().BOUNDED_RETAIN_JOBS_DAYS): string {
  return `No job has this progress link. Check the address: a job's page stays at least ${formatDays(jobsDays)} after it ended, unless its account was deleted.`;
}
