import { formatDuration, formatSeconds, formatWaitSeconds } from "@/lib/format/duration";
import { progressPhrase, type FinalRow } from "@/lib/jobs/messages";
import { outageCause } from "@/lib/ratelimit/breaker";
import type { OutsideServiceDown } from "@/lib/ratelimit/errors";

/**
 * The words a person reads when a run gives its worker slot back (./deferral.ts): on the row, on
 * its timeline, and when the wait would take it past its kind's maximum age. Times are production
 * units.
 */

/** What the deferral waits for: a rate-limit window (its scope), or an outside service that is down. */
export type DeferralWait =
  | { outage: OutsideServiceDown }
  | { outage: null; scope: string; provider: string | null; waitProductionMs: number };

/** The row's message while it waits: "Waiting 47 s for statistics:tenant-42 (the marketplace's rate limit); it resumes by itself." */
export function deferredMessage(wait: DeferralWait): string {
  if (wait.outage)
    return `Waiting for ${wait.outage.serviceName}, down since ${wait.outage.since.toISOString()} (${wait.outage.error}); it resumes by itself, and nothing is failed for it.`;
  const what = wait.provider
    ? `the ${wait.provider} provider's limit on calls at once and per second`
    : "the marketplace's rate limit";
  return `Waiting ${formatWaitSeconds(wait.waitProductionMs)} for ${wait.scope} (${what}); it resumes by itself.`;
}

const clock = (d: Date) => `${d.toISOString().slice(11, 16)} UTC`;

/**
 * The row's message while its rows are with the provider's batch service (./batch-lane.ts):
 * "Waiting for batch:batch_abc (the provider's batch service, expected by 14:05 UTC; finished
 * directly from 14:20 UTC at the latest); it looks again in 1 min." The scope is named as a
 * deferral's is, so the job page's wait reader (lib/diagnosis/blocked-by.ts) finds it.
 */
export function batchWaitMessage(
  scope: string,
  expectedBy: Date,
  lastMomentAt: Date,
  waitProductionMs: number,
): string {
  return `Waiting for ${scope} (the provider's batch service, expected by ${clock(expectedBy)}; finished directly from ${clock(lastMomentAt)} at the latest); it looks again in ${formatWaitSeconds(waitProductionMs)}.`;
}

/** PostgreSQL's `to_char` pattern for whole seconds in `formatSeconds`' form: "1,800". */
export const SECONDS_PATTERN = "FM999,999,999,990";

/**
 * The timeline event's message, as a `format()` template for the deferral statement: the slot
 * time used so far, the budget and the reschedule count are the row's as the statement leaves
 * them, so the statement fills in those three (`%s`, the seconds with `SECONDS_PATTERN`); every
 * word is here.
 */
export function deferredEventTemplate(message: string, slotProductionMs: number): string {
  const literal = (text: string) => text.replaceAll("%", "%%");
  return `${literal(message)} Gave its worker slot back after ${literal(formatSeconds(slotProductionMs))}; %s s of its %s s budget used so far (reschedule %s).`;
}

/** The `service_wait` event of an outage wait: the time lost to it in this run is not charged to the budget. */
export function serviceWaitMessage(outage: OutsideServiceDown, lostProductionMs: number): string {
  return `Waiting for ${outage.serviceName} (${outageCause(outage.error)}); ${formatSeconds(lostProductionMs)} lost to it in this run is not charged to the budget.`;
}

/** A wait that would take the job past its kind's maximum age ends it `timed_out`, with this message. */
export function pastMaximumAgeMessage(
  scope: string,
  waitProductionMs: number,
  maxAgeMs: number,
  advice: string,
): (row: FinalRow) => string {
  return (row) =>
    `Timed out after ${progressPhrase(row)}: waiting ${formatWaitSeconds(waitProductionMs)} more for ${scope} would take it past its maximum age of ${formatDuration(maxAgeMs)} (waits for rate-limit windows count there, not in its budget). ${advice}`;
}
