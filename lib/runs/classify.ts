import { isDependencyUnavailable } from "@/lib/dependencies/unavailable";
import type { Logger } from "@/lib/log";
import { DeadlineExceeded, isBatchPending, JobCancelled, JobFailed, SliceEnded } from "@/lib/core/signals";
import { isOutsideServiceDown, isRateLimitDefer, type OutsideServiceDown } from "@/lib/ratelimit/errors";
import type { CancelAsk } from "./cancel-request";
import type { RunOutcome } from "./outcome";
import type { Settled } from "./run-context";

/** What is known when the processor has settled (or the hard limit passed first). */
export interface Ending {
  settled: Settled | "hard";
  /** The processor's work, still going when the hard limit passed. */
  work: Promise<Settled>;
  signal: AbortSignal;
  shutdown: AbortSignal;
  /** The operator's request that stopped the run, if one did. */
  cancelAsk: CancelAsk | undefined;
  /** The outage the run was stopped for at its soft limit, if one was. */
  outageAtDeadline: OutsideServiceDown | null;
  log: Logger;
}

/** The run's one outcome, from how it ended and why its signal aborted. */
export function outcomeOf({ settled, work, signal, shutdown, cancelAsk, outageAtDeadline, log }: Ending): RunOutcome {
  if (settled === "hard") {
    // The processor ignored its signal; whatever it still does cannot commit once the row is killed.
    void work.then((late) => log.warn({ late: late.type }, "abandoned run settled after the hard limit"));
    return { type: "killed" };
  }
  const deadlinePassed = signal.aborted && signal.reason instanceof DeadlineExceeded;
  // Whatever the processor made of the abort (returned, threw the reason or another error), a cancel is a cancel.
  if (cancelAsk && signal.reason instanceof JobCancelled) return { type: "cancelled", ask: cancelAsk };
  // Stopped for an outage at its deadline: deferred, whatever the processor made of the abort (a
  // processor that returned has items left uncommitted; they run when the service answers).
  if (outageAtDeadline && signal.reason === outageAtDeadline && !shutdown.aborted)
    return { type: "deferred", defer: outageAtDeadline };
  return classify(settled, deadlinePassed, shutdown.aborted);
}

/** What a settled processor's result or error means for the run. */
function classify(settled: Settled, deadlinePassed: boolean, shuttingDown: boolean): RunOutcome {
  if (settled.type === "done")
    return deadlinePassed ? { type: "timed_out" } : { type: "completed", result: settled.result };
  const err = settled.error;
  const name = err instanceof Error ? err.name : "";
  // The worker is stopping: the run goes back to the queue and resumes at its cursor elsewhere.
  if (shuttingDown && !deadlinePassed && !(err instanceof JobFailed)) return { type: "handed_back", error: err };
  // A rate-limit window, an outside service that is down, or a batch not done yet: the slot goes back until then.
  if ((isRateLimitDefer(err) || isOutsideServiceDown(err) || isBatchPending(err)) && !deadlinePassed)
    return { type: "deferred", defer: err };
  if (err instanceof SliceEnded && !deadlinePassed) return { type: "sliced", ended: err };
  if (deadlinePassed || name === "DeadlineExceeded") return { type: "timed_out" };
  // A newer attempt (or a finalizer) owns the row: this run leaves quietly and writes nothing.
  if (name === "AttemptFenced") return { type: "fenced" };
  // PostgreSQL or Redis went away under the processor (outside its items, which wait on their
  // own): not the job's failure. It goes back to the queue and resumes at its cursor.
  if (isDependencyUnavailable(err)) return { type: "handed_back", error: err };
  if (err instanceof JobFailed) return { type: "failed", message: err.message, reason: err.message };
  return {
    type: "failed",
    message: "The job failed because of an internal error. An operator can retry it.",
    reason: err instanceof Error ? err.message : String(err),
    error: err,
  };
}
