import { setMaxListeners } from "node:events";
import type { Job as QueueJob } from "bullmq";
import type { Logger } from "@/lib/log";
import type { RunStart } from "./attempt";
import { watchCancel } from "./cancel-watch";
import { outcomeOf } from "./classify";
import { startHeartbeat } from "./heartbeat";
import { armHardLimit, runLimits } from "./limits";
import type { RunOutcome } from "./outcome";
import type { HardLimitWatch, Processor } from "./processor";
import { invokeProcessor, runContext, type Settled } from "./run-context";
import { armSoftLimit } from "./soft-limit";

export interface DeadlineInput {
  processors: Record<string, Processor>;
  run: RunStart;
  attemptStart: Date;
  queueJob: QueueJob;
  /** Aborts when the worker process stops. */
  shutdown: AbortSignal;
  log: Logger;
  watch?: HardLimitWatch;
}

/**
 * The deadline policy around one attempt, reported as an outcome (nothing final is written here
 * but the soft limit's `timed_out` and a cancel's `cancelled`, which must reach the row before the
 * signal propagates). Its parts, in the order they are armed:
 * - the limits (./limits.ts) count from the attempt's start, moved back by slot time earlier runs used;
 * - at the hard limit a processor that has not settled is abandoned (`killed`);
 * - at the soft limit (./soft-limit.ts) the row is finalized `timed_out` first, then the job's
 *   signal aborts with `DeadlineExceeded` — or, while its outside service is down, it is deferred;
 * - an operator's cancel (./cancel-watch.ts: polled in Redis, and on the row at each heartbeat,
 *   ./heartbeat.ts) finalizes the row `cancelled` first, then aborts with `JobCancelled`;
 * - the hard-limit watchdog thread (./watchdog.ts) is told the hard limit, for a processor that
 *   blocks the event loop;
 * - how the processor settled is classified (./classify.ts): a deferral, a hand-back, a fence, a failure.
 * `deadline` aborts the run's signal; a killed run's settlement aborts it too.
 */
export async function runUnderDeadline({
  processors,
  run,
  attemptStart,
  queueJob,
  shutdown,
  log,
  watch,
}: DeadlineInput): Promise<{ outcome: RunOutcome; deadline: AbortController }> {
  const deadline = new AbortController();
  // Every item in flight (and each of its calls) listens to the run's signal: hundreds, by design.
  setMaxListeners(0, deadline.signal);
  const processor = processors[run.kind];
  if (!processor)
    return {
      outcome: {
        type: "failed",
        message: `No worker knows the job kind “${run.kind}”.`,
        reason: `unknown kind ${run.kind}`,
      },
      deadline,
    };

  const leaveShutdown = followShutdown(shutdown, deadline);
  let settling = false;
  const settled = () => settling;
  const limits = runLimits(run, attemptStart);
  const hard = armHardLimit(limits);
  const soft = armSoftLimit({ run, limits, hard, deadline, settled, log, watch });
  const cancel = watchCancel({ run, deadline, settled, log });
  const beat = startHeartbeat(run, queueJob, cancel.heard);
  watch?.start({ jobId: run.jobId, attempt: run.attempt, hardAt: limits.startedAt + limits.hardMs, kind: run.kind });

  let ending: Settled | "hard";
  let work: Promise<Settled>;
  try {
    const ctx = runContext({ run, signal: deadline.signal, log, queueJob, limits, dispatchHold: soft.dispatchHold });
    log.info(
      { budget: { softMs: run.budgetSoftMs, hardMs: run.budgetHardMs, source: run.budgetSource }, cursor: run.cursor },
      "run started",
    );
    work = invokeProcessor(processor, ctx, limits.startedAt + limits.softMs);
    ending = await Promise.race([work, hard.reached]);
  } finally {
    soft.clear();
    hard.clear();
    beat.stop();
    cancel.stop();
    settling = true;
    leaveShutdown();
    watch?.end(run.jobId);
  }
  await soft.fired();
  await cancel.fired();
  const outcome = outcomeOf({
    settled: ending,
    work,
    signal: deadline.signal,
    shutdown,
    cancelAsk: cancel.ask(),
    outageAtDeadline: soft.outage(),
    log,
  });
  return { outcome, deadline };
}

/**
 * One controller per run; the process-wide shutdown signal feeds it through a listener that is
 * removed when the run ends (AbortSignal.any on a long-lived signal retains every run). A process
 * runs as many at once as its queues' concurrency: no limit on the listeners, or every run past
 * the tenth would log a "memory leak" that is none.
 */
function followShutdown(shutdown: AbortSignal, deadline: AbortController): () => void {
  setMaxListeners(0, shutdown);
  const onShutdown = () => deadline.abort(shutdown.reason);
  if (shutdown.aborted) onShutdown();
  else shutdown.addEventListener("abort", onShutdown, { once: true });
  return () => shutdown.removeEventListener("abort", onShutdown);
}
