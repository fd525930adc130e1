import { formatSeconds } from "@/lib/format/duration";
import { kindSpec } from "@/lib/queues/catalog";
import type { FinalRow } from "./finalize-statement";

/**
 * The words a person reads when a run ends: counts of committed items and the budget that ended
 * it. Pure (no database), so the job runtime, the reaper and the watchdog thread say the same
 * thing about the same row.
 */

export function countLabel(n: number, noun: string): string {
  return `${n.toLocaleString("en-US")} ${noun}${n === 1 ? "" : "s"}`;
}

/** What one item of this kind is called ("row", "page"), or "item" for a kind the catalog does not know. */
export function nounOf(kind: string): string {
  return kindSpec(kind)?.noun ?? "item";
}

/** "340 of 1,772 rows", from the committed counts. */
export function progressPhrase(row: Pick<FinalRow, "kind" | "total" | "processed" | "failed">): string {
  const done = row.processed + row.failed;
  const noun = nounOf(row.kind);
  return row.total !== null ? `${done.toLocaleString("en-US")} of ${countLabel(row.total, noun)}` : countLabel(done, noun);
}

/** A run that returned without a message of its own. */
export function completedMessage(row: FinalRow): string {
  const noun = nounOf(row.kind);
  const done = row.processed + row.failed;
  if (row.failed === 0) return `Processed all ${countLabel(done, noun)}.`;
  return `Processed ${row.processed.toLocaleString("en-US")} of ${countLabel(done, noun)}; ${countLabel(row.failed, noun)} failed (see the list).`;
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
