import type { Job as QueueJob } from "bullmq";
import type { Logger } from "@/lib/log";
import { reschedules } from "@/lib/catalog/catalog";
import { runWithRateLimitDeferral } from "@/lib/ratelimit/context";
import { deferThresholdMs } from "@/lib/ratelimit/limiter";
import { scaled } from "@/lib/time";
import type { RunStart } from "./attempt";
import { isOutsideServiceDown } from "@/lib/ratelimit/errors";
import { recordDeferral, type DeferralResult, type DeferSignal } from "./deferral";
import { outageWait } from "./outage-waits";

/**
 * The reschedule policy, whole: a job of a queue the catalog marks `reschedule` that must wait
 * longer than the deferral threshold for a rate-limit window gives its worker slot back — the
 * queue job moves to *delayed* for exactly the wait, without spending a retry attempt — instead of
 * sleeping in the slot. This module owns every part of it:
 * - where the deferral context is opened (`withDeferral`): only around those queues' runs, so the
 *   limiter turns a long wait into `RateLimitDefer` there and sleeps it out everywhere else;
 * - the budget's carry-over (`slotClockStart`): a resumed run counts the slot time earlier runs used;
 * - what a deferral writes (./deferral.ts, beside the finalize statements: the row `delayed` with
 *   what it waits for, and the maximum-age check) and what happens to the queue job (`deferRun`:
 *   the wake-up a little before the window opens, and `moveToDelayed` without spending an attempt);
 * - the BullMQ worker options of those queues (`rescheduleWorkerOptions`).
 * Processors only let the typed deferral through; they resume at their cursor like any run.
 */

/**
 * BullMQ's `maxStartedAttempts` for those queues: every reschedule is one more start of the same
 * queue job, so an unbounded count is how a job that re-delays itself forever would look. A
 * legitimate sync waits at least the 5 s threshold per reschedule and lives at most its maximum
 * age (6 h): at most 4,320 starts. 10,000 never fails a throttled sync and still ends a loop.
 */
export const MAX_STARTED_ATTEMPTS = 10_000;

/** Worker options of a queue under the reschedule policy (none for the others). */
export function rescheduleWorkerOptions(queueName: string): { maxStartedAttempts?: number } {
  return reschedules(queueName) ? { maxStartedAttempts: MAX_STARTED_ATTEMPTS } : {};
}

/**
 * Runs `fn` (a run's processor) in the deferral context when its queue reschedules: inside it,
 * the limiter throws `RateLimitDefer` for a wait over the threshold. Other queues' runs sleep
 * their waits in the slot, as an HTTP request would get a 429.
 */
export function withDeferral<T>(queueName: string, fn: () => Promise<T>): Promise<T> {
  return reschedules(queueName) ? runWithRateLimitDeferral(deferThresholdMs(), fn) : fn();
}

/**
 * Real time (ms since the epoch) from which a run's limits count: the attempt's start, moved back
 * by the slot time its earlier runs used (production ms on the row). The budget counts time in a
 * worker slot, not time spent waiting in delayed.
 */
export function slotClockStart(attemptStart: Date, slotMsUsed: number): number {
  return attemptStart.getTime() - scaled(slotMsUsed);
}

/**
 * Real milliseconds a rescheduled job is woken before its wait ends: about what a resume costs
 * (queue promotion, a worker slot, starting the attempt — a few database round trips). Not
 * time-scaled: machine latency does not shrink with the time scale.
 */
const RESUME_LEAD_MS = 150;

/**
 * When the queue job should be back in a slot: a little before the window opens, since taking
 * the slot and starting the attempt take that long and a bucket that refills while nobody asks
 * loses the time. The limiter still gates the request; what is left of the wait is slept. The
 * lead is at most the threshold, so what is left on waking is slept rather than deferred again.
 */
function wakeUpDelayMs(waitMs: number): number {
  const lead = Math.min(RESUME_LEAD_MS, deferThresholdMs(), waitMs / 2);
  return Math.ceil(waitMs - lead);
}

/**
 * A run deferred by the limiter: writes it down and, when it was written, moves the queue job to
 * *delayed* until its wake-up without spending an attempt (BullMQ's `moveToDelayed` with the
 * lock token; the caller then throws `DelayedError`, which BullMQ takes as "not finished, not
 * failed"). Without a token (a run started outside a BullMQ worker) the queue job is the caller's.
 */
export async function deferRun(
  run: Pick<RunStart, "jobId" | "attempt" | "queue" | "kind">,
  attemptStart: Date,
  defer: DeferSignal,
  log: Logger,
  queueJob: QueueJob,
  token: string | undefined,
): Promise<DeferralResult> {
  // A service that stays down is looked at less often, and wakes its waiters when it answers (./outage-waits.ts).
  const wait = isOutsideServiceDown(defer) ? await outageWait(defer, run.jobId, run.queue) : defer;
  const result = await recordDeferral(run, attemptStart, wait, log);
  if (result === "delayed" && token !== undefined)
    await queueJob.moveToDelayed(Date.now() + wakeUpDelayMs(wait.waitMs), token);
  return result;
}
