import type { Logger } from "@/lib/log";
import { JobCancelled } from "@/lib/core/signals";
import type { RunStart } from "./attempt";
import { CANCEL_POLL_MS, cancelAnnounced, finalizeCancelled, type CancelAsk } from "./cancel-request";
import { finalizeBeforeAbort } from "./limits";

/** A running attempt's ear for an operator's cancel. */
export interface CancelWatch {
  /** A request heard (by the poll, or by the heartbeat's check of the row); null: none. */
  heard(ask: CancelAsk | null): void;
  /** The request that stopped the run, if one did. */
  ask(): CancelAsk | undefined;
  /** The cancel under way, if one was heard: the outcome is decided once it is done. */
  fired(): Promise<void> | undefined;
  stop(): void;
}

export interface CancelWatchInput {
  run: RunStart;
  deadline: AbortController;
  /** True once the processor settled: a request heard after that is too late, the run ended on its own. */
  settled(): boolean;
  log: Logger;
}

/**
 * Polls the request's Redis key every `CANCEL_POLL_MS` (./cancel-request.ts). A request heard
 * ends the row first (its committed progress, who asked), then aborts the signal with
 * `JobCancelled`, as the soft limit does.
 */
export function watchCancel({ run, deadline, settled, log }: CancelWatchInput): CancelWatch {
  let fired: Promise<void> | undefined;
  let asked: CancelAsk | undefined;
  const heard = (ask: CancelAsk | null) => {
    if (!ask || fired || settled() || deadline.signal.aborted) return;
    asked = ask;
    fired = (async () => {
      if (await finalizeBeforeAbort(finalizeCancelled(run, ask), log, "could not finalize the cancelled row"))
        log.info({ by: ask.by }, "cancelled by an operator: stopping");
      deadline.abort(new JobCancelled(run.jobId, ask.by));
    })();
  };
  // One poll at a time: while Redis is away, a GET waits, and polls must not pile up behind it.
  let polling = false;
  const poll = setInterval(() => {
    if (polling) return;
    polling = true;
    void cancelAnnounced(run.jobId, run.attempt)
      .then(heard, () => undefined)
      .finally(() => (polling = false));
  }, CANCEL_POLL_MS);
  return { heard, ask: () => asked, fired: () => fired, stop: () => clearInterval(poll) };
}
