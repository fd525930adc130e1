import { setMaxListeners } from "node:events";
import { DelayedError, UnrecoverableError, type Job as QueueJob } from "bullmq";
import { resolveBudget } from "@/lib/budgets/budgets";
import { DependencyPause, outageBackoffMs, whileUnavailable } from "@/lib/dependencies/pause";
import { isDependencyUnavailable } from "@/lib/dependencies/unavailable";
import { CANCEL_POLL_MS, cancelAnnounced, finalizeCancelled, pendingCancel, type CancelAsk } from "@/lib/jobs/cancel";
import { takeOverStalledRun } from "@/lib/jobs/crash-resume";
import { DeadlineExceeded, JobCancelled, JobFailed, SliceEnded } from "@/lib/jobs/errors";
import { timedOutMessage } from "@/lib/jobs/messages";
import { partOf, startNextPartEarly } from "@/lib/jobs/parts";
import { reconcileRerun } from "@/lib/jobs/rerun";
import { sliceOf } from "@/lib/jobs/projection";
import { fanOutIfTooBig } from "@/lib/jobs/split";
import { finalizeJob, heartbeat, startAttempt, type RunStart } from "@/lib/jobs/run";
import { heartbeatIntervalMs } from "@/lib/jobs/stuck";
import { env } from "@/lib/env";
import { itemsInFlight, jobPayloadSchema } from "@/lib/queues/catalog";
import { withLogFields, type Logger } from "@/lib/log";
import { runAsTenant } from "@/lib/ratelimit/context";
import { isOutsideServiceDown, isRateLimitDefer } from "@/lib/ratelimit/errors";
import { scaled } from "@/lib/time";
import { currentTraceContext } from "@/lib/tracing/tracing";
import { settleRun, type RunOutcome } from "./outcome";
import { describeQueueJob, mirrorProgress } from "./queue-job";
import type { HardLimitWatch, Processor, RunContext, RunResult } from "./processor";
import { slotClockStart, withDeferral } from "./reschedule";

/** Real time a run always gets between its soft and hard limit, whatever the time scale. */
const MIN_WIND_DOWN_MS = 1_000;
/** How long the soft limit waits for the row to be finalized before aborting anyway. */
const SOFT_FINALIZE_WAIT_MS = 2_000;
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Runs one queue job against its Job row under the deadline policy, then settles it: what
 * happened is a `RunOutcome` (./outcome.ts), and one function maps it to the row, the metrics,
 * the log line and the queue job's result.
 *
 * `token` is the BullMQ lock token: with it, a run that gives its slot back (a rate-limit wait, a
 * stopping worker) moves its queue job to *delayed* without spending an attempt. Without it (a
 * run started outside a BullMQ worker) that signal is rethrown for the caller.
 */
export async function runJob(
  processors: Record<string, Processor>,
  queueJob: QueueJob,
  shutdown: AbortSignal,
  log: Logger,
  watch?: HardLimitWatch,
  token?: string,
): Promise<void> {
  const { jobId } = jobPayloadSchema.parse(queueJob.data);
  const attemptStart = new Date();
  let run: RunStart | null;
  try {
    // A queue job BullMQ found stalled whose row is still `running`: its run stopped without
    // settling (the worker died or lost it). The resume is counted, and bounded (lib/jobs/crash-resume.ts).
    if (queueJob.stalledCounter > 0 && (await takeOverStalledRun(jobId))?.type === "stopped") {
      const reason = `Job ${jobId} stopped with its worker too many times; it was ended, not resumed (see its page).`;
      log.warn({ jobId }, "its runs stopped without finishing too many times: the job is ended, not resumed");
      // The queue job fails too, so a queue tool never shows "completed" beside an ended row.
      throw new UnrecoverableError(reason);
    }
    run = await startAttempt(jobId, attemptStart, resolveBudget);
  } catch (err) {
    // A worker stopping while its database goes away, or a database that is not reachable: the
    // queue job goes back untouched (without spending an attempt), to start when it answers.
    const outage = isDependencyUnavailable(err);
    if ((!shutdown.aborted && !outage) || token === undefined) throw err;
    if (outage) log.warn({ jobId, err: (err as Error).message }, "the database is not reachable: the job starts again in a moment");
    await queueJob.moveToDelayed(Date.now() + (outage ? outageBackoffMs(3) : 0), token);
    throw new DelayedError();
  }
  if (!run) {
    // A queue job whose row is already terminal: retried from outside Bounded, or left over.
    const rerun = await reconcileRerun(jobId, (queueJob.attemptsMade ?? 0) > 0);
    if (rerun.type === "resume") run = await startAttempt(jobId, attemptStart, resolveBudget);
    if (!run) {
      if (rerun.type === "done") return log.info({ jobId }, "job already completed; nothing to run");
      const reason = rerun.type === "refused" ? rerun.reason : `Job ${jobId} changed while it was being retried from the queue; it was not run.`;
      log.warn({ jobId, reason }, "queue job ran for a finished job: not run");
      throw new UnrecoverableError(reason);
    }
  }
  // Bound once: every line of this run (runtime, processor, items) says whose job it is and which trace.
  const jobLog = log.child({ jobId, tenantId: run.tenantId, kind: run.kind, attempt: run.attempt, traceId: currentTraceContext()?.traceId });
  describeQueueJob(queueJob, run);
  // A cancel asked of an earlier attempt that went back to the queue before it saw the request.
  const asked = await pendingCancel(jobId).catch(() => null);
  if (asked) {
    await finalizeCancelled(run, asked);
    jobLog.info({ by: asked.by }, "cancelled by an operator before this attempt ran");
    return;
  }
  // A job that cannot fit its budget becomes parts before it does any work; its run ends here. A
  // projection that cannot be read (a database blip) is no reason not to run: it runs whole, in
  // slices.
  const fanOut = await fanOutIfTooBig(run, attemptStart).catch((err: unknown) => {
    jobLog.warn({ err }, "could not project the job; it runs whole");
    return { type: "not_projected" } as const;
  });
  if (fanOut.type === "split") {
    jobLog.info({ parts: fanOut.plan.parts, projectedMs: Math.round(fanOut.plan.projection.ms), firstPart: fanOut.first }, "projected not to fit its budget: split into parts");
    return;
  }
  if (fanOut.type === "already_split") {
    jobLog.info("the job was split; its parts do the work");
    return;
  }
  const { outcome, deadline } = await executeRun(processors, run, attemptStart, queueJob, shutdown, jobLog, watch);
  // Writing the outcome waits out an outage of the database (the row is this attempt's until then),
  // unless the worker is stopping: then the reaper or the next attempt settles it.
  const settle = () => settleRun({ run, attemptStart, outcome, log: jobLog, queueJob, token, abort: (reason) => deadline.abort(reason) });
  await whileUnavailable(settle, new DependencyPause(shutdown, jobLog));
}

/**
 * The deadline policy around one attempt, reported as an outcome (nothing final is written here
 * but the soft limit's `timed_out`, which must reach the row before the signal propagates):
 * - the limits count from the attempt's start (moved back by slot time earlier runs used);
 * - at the soft limit the row is finalized `timed_out` first, then the job's signal aborts with
 *   `DeadlineExceeded`;
 * - at the hard limit a processor that has not settled is abandoned (`killed`);
 * - an operator's cancel (polled in Redis, and on the row at each heartbeat) finalizes the row
 *   `cancelled` first, then aborts the signal with `JobCancelled`, as the soft limit does;
 * - everything the processor throws is classified: a deferral, a hand-back, a fence, a failure.
 */
async function executeRun(
  processors: Record<string, Processor>,
  run: RunStart,
  attemptStart: Date,
  queueJob: QueueJob,
  shutdown: AbortSignal,
  jobLog: Logger,
  watch?: HardLimitWatch,
): Promise<{ outcome: RunOutcome; deadline: AbortController }> {
  const { jobId, attempt } = run;
  const deadline = new AbortController();
  // Every item in flight (and each of its calls) listens to the run's signal: hundreds, by design.
  setMaxListeners(0, deadline.signal);
  const processor = processors[run.kind];
  if (!processor) return { outcome: { type: "failed", message: `No worker knows the job kind “${run.kind}”.`, reason: `unknown kind ${run.kind}` }, deadline };

  // One controller per run; the process-wide shutdown signal feeds it through a listener that is
  // removed when the run ends (AbortSignal.any on a long-lived signal retains every run).
  const onShutdown = () => deadline.abort(shutdown.reason);
  if (shutdown.aborted) onShutdown();
  else shutdown.addEventListener("abort", onShutdown, { once: true });
  const signal = deadline.signal;
  const softMs = scaled(run.budgetSoftMs);
  // At small time scales the gap between the limits can be shorter than one database call (which
  // takes no signal): a run that honours its signal still needs that long to wind down.
  const hardMs = Math.max(scaled(run.budgetHardMs), softMs + MIN_WIND_DOWN_MS);
  // Limits count from the moment recorded on the row as the attempt's start (minus slot time a
  // rescheduled job already used). Node runs a timer longer than 2^31−1 ms at once, so long
  // limits are re-armed in steps.
  const startedAt = slotClockStart(attemptStart, run.slotMsUsed);
  const at = (ms: number, fn: () => void): { clear(): void } => {
    let timer: NodeJS.Timeout;
    const arm = () => {
      const left = startedAt + ms - Date.now();
      timer = left > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS) : setTimeout(fn, Math.max(0, left));
    };
    arm();
    return { clear: () => clearTimeout(timer) };
  };

  // Soft limit: the row is finalized before the signal propagates, so what a person sees never
  // depends on how the processor reacts to the abort — unless the database does not answer in
  // time, in which case the abort goes ahead and the outcome's settlement finalizes.
  let softFired: Promise<void> | undefined;
  const softTimer = at(softMs, () => {
    softFired = (async () => {
      const finalizing = finalizeJob(jobId, attempt, { status: "timed_out", message: timedOutMessage, from: ["running"], known: run }).catch((err) => {
        jobLog.error({ err }, "could not finalize the timed-out row");
        return null;
      });
      const finalized = await Promise.race([finalizing, new Promise<null>((r) => setTimeout(() => r(null), SOFT_FINALIZE_WAIT_MS).unref())]);
      if (finalized) jobLog.warn({ softMs: run.budgetSoftMs }, "soft limit reached: job timed out");
      deadline.abort(new DeadlineExceeded(jobId, run.budgetSoftMs));
    })();
  });
  let hardTimer: { clear(): void } | undefined;
  const hard = new Promise<"hard">((resolve) => {
    hardTimer = at(hardMs, () => resolve("hard"));
  });
  // Cancel: the row first (its committed progress, who asked), then the signal, as at the soft limit.
  let cancelFired: Promise<void> | undefined;
  let cancelAsk: CancelAsk | undefined;
  // A poll answered after the processor settled is too late: the run has ended on its own.
  let settling = false;
  const onCancel = (ask: CancelAsk | null) => {
    if (!ask || cancelFired || settling || signal.aborted) return;
    cancelAsk = ask;
    cancelFired = (async () => {
      const finalizing = finalizeCancelled(run, ask).catch((err: unknown) => {
        jobLog.error({ err }, "could not finalize the cancelled row");
        return null;
      });
      const finalized = await Promise.race([finalizing, new Promise<null>((r) => setTimeout(() => r(null), SOFT_FINALIZE_WAIT_MS).unref())]);
      if (finalized) jobLog.info({ by: ask.by }, "cancelled by an operator: stopping");
      deadline.abort(new JobCancelled(jobId, ask.by));
    })();
  };
  // One poll at a time: while Redis is away, a GET waits, and polls must not pile up behind it.
  let polling = false;
  const cancelPoll = setInterval(() => {
    if (polling) return;
    polling = true;
    void cancelAnnounced(jobId, attempt)
      .then(onCancel, () => undefined)
      .finally(() => (polling = false));
  }, CANCEL_POLL_MS);
  const beat = setInterval(() => {
    void heartbeat(jobId, attempt).catch(() => undefined);
    // The counts on the queue job too, for tools that read the queue (bull-board): at heartbeats, not per item.
    void mirrorProgress(queueJob, jobId);
    // The durable record of a cancel, for a request whose Redis key was lost.
    void pendingCancel(jobId).then(onCancel, () => undefined);
  }, heartbeatIntervalMs());
  watch?.start({ jobId, attempt, hardAt: startedAt + hardMs, kind: run.kind });

  const part = partOf(run.params);
  const slice = sliceOf(run.kind, softMs);
  type Settled = { type: "done"; result: RunResult } | { type: "error"; error: unknown };
  let settled: Settled | "hard";
  let work: Promise<Settled>;
  try {
    const ctx: RunContext = { run, signal, log: jobLog, queueJob, loop: {
        jobId,
        attempt,
        kind: run.kind,
        queue: run.queue,
        concurrency: itemsInFlight(run.kind, env()),
        cursor: run.cursor,
        signal,
        log: jobLog,
        parentId: run.parentId,
        range: part ?? undefined,
        // A part that has sent out its last item starts the next one: the provider does not idle through its tail.
        onAllDispatched:
          part && run.parentId
            ? () => void startNextPartEarly({ parentId: run.parentId!, index: part.index }).catch((err: unknown) => jobLog.warn({ err }, "could not start the next part early; it starts when this one completes"))
            : undefined,
        // A run slower than its projection hands its rest on before its deadline (lib/jobs/projection.ts).
        slice: slice && {
          dispatchUntil: performance.now() + (startedAt + slice.dispatchMs - Date.now()),
          drainUntil: performance.now() + (startedAt + slice.drainMs - Date.now()),
        },
      },
    };
    jobLog.info({ budget: { softMs: run.budgetSoftMs, hardMs: run.budgetHardMs, source: run.budgetSource }, cursor: run.cursor }, "run started");
    work = withDeferral(run.queue, () => withLogFields({ tenantId: run.tenantId, traceId: currentTraceContext()?.traceId }, () => runAsTenant(run.tenantId, () => Promise.resolve().then(() => processor(ctx))))).then(
      (result) => ({ type: "done" as const, result: result ?? {} }),
      (error: unknown) => ({ type: "error" as const, error }),
    );
    settled = await Promise.race([work, hard]);
  } finally {
    softTimer.clear();
    hardTimer?.clear();
    clearInterval(beat);
    clearInterval(cancelPoll);
    settling = true;
    shutdown.removeEventListener("abort", onShutdown);
    watch?.end(jobId);
  }
  await softFired;
  await cancelFired;

  if (settled === "hard") {
    // The processor ignored its signal; whatever it still does cannot commit once the row is killed.
    void work.then((late) => jobLog.warn({ late: late.type }, "abandoned run settled after the hard limit"));
    return { outcome: { type: "killed" }, deadline };
  }
  const deadlinePassed = signal.aborted && signal.reason instanceof DeadlineExceeded;
  // Whatever the processor made of the abort (returned, threw the reason or another error), a cancel is a cancel.
  if (cancelAsk && signal.reason instanceof JobCancelled) return { outcome: { type: "cancelled", ask: cancelAsk }, deadline };
  return { outcome: classify(settled, deadlinePassed, shutdown.aborted), deadline };
}

/** What a settled processor's result or error means for the run. */
function classify(settled: { type: "done"; result: RunResult } | { type: "error"; error: unknown }, deadlinePassed: boolean, shuttingDown: boolean): RunOutcome {
  if (settled.type === "done") return deadlinePassed ? { type: "timed_out" } : { type: "completed", result: settled.result };
  const err = settled.error;
  const name = err instanceof Error ? err.name : "";
  // The worker is stopping: the run goes back to the queue and resumes at its cursor elsewhere.
  if (shuttingDown && !deadlinePassed && !(err instanceof JobFailed)) return { type: "handed_back", error: err };
  // A rate-limit window, or an outside service that is down: the slot goes back until then.
  if ((isRateLimitDefer(err) || isOutsideServiceDown(err)) && !deadlinePassed) return { type: "deferred", defer: err };
  if (err instanceof SliceEnded && !deadlinePassed) return { type: "sliced", ended: err };
  if (deadlinePassed || name === "DeadlineExceeded") return { type: "timed_out" };
  // A newer attempt (or a finalizer) owns the row: this run leaves quietly and writes nothing.
  if (name === "AttemptFenced") return { type: "fenced" };
  // PostgreSQL or Redis went away under the processor (outside its items, which wait on their
  // own): not the job's failure. It goes back to the queue and resumes at its cursor.
  if (isDependencyUnavailable(err)) return { type: "handed_back", error: err };
  if (err instanceof JobFailed) return { type: "failed", message: err.message, reason: err.message };
  return { type: "failed", message: "The job failed because of an internal error. An operator can retry it.", reason: err instanceof Error ? err.message : String(err), error: err };
}
