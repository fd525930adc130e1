import type { Logger } from "@/lib/log";
import { scaled } from "@/lib/time";
import type { RunStart } from "./attempt";
import { slotClockStart } from "./reschedule";

/** Real time a run always gets between its soft and hard limit, whatever the time scale. */
const MIN_WIND_DOWN_MS = 1_000;
/** How long the soft limit (or a cancel) waits for the row to be finalized before aborting anyway. */
const FINALIZE_WAIT_MS = 2_000;
/** Node runs a timer longer than 2^31−1 ms at once, so long limits are re-armed in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A run's limits in real ms, counted from `startedAt` (ms since the epoch). */
export interface RunLimits {
  startedAt: number;
  softMs: number;
  hardMs: number;
}

/**
 * The limits of a run: its budget at the time scale, counted from the moment recorded on the row
 * as the attempt's start minus the slot time a rescheduled job already used (./reschedule.ts). At
 * small time scales the gap between the limits can be shorter than one database call (which takes
 * no signal): a run that honours its signal still needs that long to wind down.
 */
export function runLimits(
  run: Pick<RunStart, "budgetSoftMs" | "budgetHardMs" | "slotMsUsed">,
  attemptStart: Date,
): RunLimits {
  const softMs = scaled(run.budgetSoftMs);
  return {
    startedAt: slotClockStart(attemptStart, run.slotMsUsed),
    softMs,
    hardMs: Math.max(scaled(run.budgetHardMs), softMs + MIN_WIND_DOWN_MS),
  };
}

/** Calls `fn` at `startedAt + ms`, however far away that is. */
export function timerAt(startedAt: number, ms: number, fn: () => void): { clear(): void } {
  let timer: NodeJS.Timeout;
  const arm = () => {
    const left = startedAt + ms - Date.now();
    timer = left > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS) : setTimeout(fn, Math.max(0, left));
  };
  arm();
  return { clear: () => clearTimeout(timer) };
}

/** The hard limit: `reached` resolves when it passes; the soft limit's verdict pauses and moves it. */
export interface HardLimit {
  reached: Promise<"hard">;
  clear(): void;
  /** Arms it again, `inMs` from now. */
  rearm(inMs: number): void;
}

export function armHardLimit(limits: RunLimits): HardLimit {
  let reach: (value: "hard") => void = () => undefined;
  const reached = new Promise<"hard">((resolve) => (reach = resolve));
  let timer = timerAt(limits.startedAt, limits.hardMs, () => reach("hard"));
  return {
    reached,
    clear: () => timer.clear(),
    rearm: (inMs) => {
      timer = timerAt(limits.startedAt, Date.now() - limits.startedAt + inMs, () => reach("hard"));
    },
  };
}

/**
 * A write that ends the row before the run's signal aborts (the soft limit's `timed_out`, a
 * cancel's `cancelled`), waited for at most `FINALIZE_WAIT_MS`: what a person sees never depends
 * on how the processor reacts to the abort — unless the database does not answer in time, in
 * which case the abort goes ahead and the outcome's settlement finalizes. Null when it failed or
 * did not answer in time.
 */
export async function finalizeBeforeAbort<T>(write: Promise<T>, log: Logger, failure: string): Promise<T | null> {
  const finalizing = write.catch((err: unknown) => {
    log.error({ err }, failure);
    return null;
  });
  return Promise.race([finalizing, new Promise<null>((r) => setTimeout(() => r(null), FINALIZE_WAIT_MS).unref())]);
}
