import type { Job as QueueJob } from "bullmq";
import { DependencyPause, whileUnavailable } from "@/lib/dependencies/pause";
import type { Logger } from "@/lib/log";
import { jobPayloadSchema } from "@/lib/catalog/catalog";
import { currentTraceContext } from "@/lib/tracing/tracing";
import type { RunStart } from "./attempt";
import { cancelOpenBatch } from "./batch-lane";
import { cancelAskedAtStart, finalizeCancelled } from "./cancel-request";
import { runUnderDeadline } from "./deadline";
import { fanOutIfTooBig } from "./fan-out";
import { settleRun } from "./outcome";
import type { HardLimitWatch, Processor } from "./processor";
import { describeQueueJob } from "./queue-job";
import { startRun } from "./start-run";

/**
 * Runs one queue job against its Job row under the deadline policy, then settles it. The walk,
 * in order: start the attempt (./start-run.ts: a stalled run taken over, a terminal row
 * reconciled), end before any work when a cancel is pending or the job becomes parts
 * (./fan-out.ts), run the processor under its limits (./deadline.ts), and settle what happened —
 * a `RunOutcome` — on the row, the metrics, the log line and the queue job (./outcome.ts).
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
  const run = await startRun({ jobId, attemptStart, queueJob, shutdown, log, token });
  if (!run) return;
  // Bound once: every line of this run (runtime, processor, items) says whose job it is and which trace.
  const jobLog = log.child({
    jobId,
    tenantId: run.tenantId,
    kind: run.kind,
    attempt: run.attempt,
    traceId: currentTraceContext()?.traceId,
  });
  describeQueueJob(queueJob, run);
  if (await endsBeforeWork(run, attemptStart, jobLog)) return;
  const { outcome, deadline } = await runUnderDeadline({
    processors,
    run,
    attemptStart,
    queueJob,
    shutdown,
    log: jobLog,
    watch,
  });
  // Writing the outcome waits out an outage of the database (the row is this attempt's until then),
  // unless the worker is stopping: then the reaper or the next attempt settles it.
  const settle = () =>
    settleRun({ run, attemptStart, outcome, log: jobLog, queueJob, token, abort: (reason) => deadline.abort(reason) });
  await whileUnavailable(settle, new DependencyPause(shutdown, jobLog));
}

/**
 * A run that ends before its processor is called: a cancel asked of an earlier attempt that went
 * back to the queue before it saw the request, or a job that cannot fit its budget and becomes
 * parts. A projection that cannot be read (a database blip) is no reason not to run: it runs
 * whole, in slices. A resumed attempt was projected when it started: it is not projected again.
 */
async function endsBeforeWork(run: RunStart, attemptStart: Date, jobLog: Logger): Promise<boolean> {
  const asked = await cancelAskedAtStart(run).catch(() => null);
  if (asked) {
    await finalizeCancelled(run, asked);
    jobLog.info({ by: asked.by }, "cancelled by an operator before this attempt ran");
    // A run waiting on its batch when the request came: the batch at the provider stops too.
    await cancelOpenBatch(run.jobId, jobLog);
    return true;
  }
  if (run.resumed) return false;
  const fanOut = await fanOutIfTooBig(run, attemptStart).catch((err: unknown) => {
    jobLog.warn({ err }, "could not project the job; it runs whole");
    return { type: "not_projected" } as const;
  });
  if (fanOut.type === "split") {
    jobLog.info(
      { parts: fanOut.plan.parts, projectedMs: Math.round(fanOut.plan.projection.ms), firstPart: fanOut.first },
      "projected not to fit its budget: split into parts",
    );
    return true;
  }
  if (fanOut.type === "already_split") {
    jobLog.info("the job was split; its parts do the work");
    return true;
  }
  return false;
}
