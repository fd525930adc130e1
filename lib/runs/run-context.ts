import type { Job as QueueJob } from "bullmq";
import { env } from "@/lib/env";
import { partOf, startNextPartEarly } from "@/lib/jobs/parts";
import { sliceOf } from "@/lib/projection/projection";
import { withLogFields, type Logger } from "@/lib/log";
import { itemsInFlight } from "@/lib/catalog/catalog";
import { runAsTenant } from "@/lib/ratelimit/context";
import { withCallOwner } from "@/lib/ratelimit/silence";
import { currentTraceContext } from "@/lib/tracing/tracing";
import type { RunStart } from "./attempt";
import type { RunLimits } from "./limits";
import type { Processor, RunContext, RunResult } from "./processor";
import { withDeferral } from "./reschedule";

/** How a processor settled: its result, or what it threw. */
export type Settled = { type: "done"; result: RunResult } | { type: "error"; error: unknown };

export interface RunContextInput {
  run: RunStart;
  signal: AbortSignal;
  log: Logger;
  queueJob: QueueJob;
  limits: RunLimits;
  /** The soft limit's hold on dispatching (./soft-limit.ts). */
  dispatchHold(): Promise<void>;
}

/** What the processor is given: the run, its signal, and the item loop ready-made for `forEachItem`. */
export function runContext({ run, signal, log, queueJob, limits, dispatchHold }: RunContextInput): RunContext {
  const part = partOf(run.params);
  const slice = sliceOf(run.kind, limits.softMs);
  const { jobId, attempt } = run;
  const { startedAt } = limits;
  return {
    run,
    signal,
    log,
    queueJob,
    loop: {
      jobId,
      attempt,
      kind: run.kind,
      queue: run.queue,
      concurrency: itemsInFlight(run.kind, env()),
      cursor: run.cursor,
      signal,
      log,
      parentId: run.parentId,
      range: part ?? undefined,
      dispatchHold,
      // A part that has sent out its last item starts the next one: the provider does not idle through its tail.
      onAllDispatched:
        part && run.parentId
          ? () =>
              void startNextPartEarly({ parentId: run.parentId!, index: part.index }).catch((err: unknown) =>
                log.warn({ err }, "could not start the next part early; it starts when this one completes"),
              )
          : undefined,
      // A run slower than its projection hands its rest on before its deadline (lib/projection/projection.ts).
      slice: slice && {
        dispatchUntil: performance.now() + (startedAt + slice.dispatchMs - Date.now()),
        drainUntil: performance.now() + (startedAt + slice.drainMs - Date.now()),
      },
    },
  };
}

/**
 * Calls the processor in the run's contexts — the deferral context when its queue reschedules
 * (./reschedule.ts), the log fields, the tenant and its soft deadline `deadlineAt` (real ms since
 * the epoch: its calls go first when it is close), and the owner of its outside calls — and
 * reports how it settled, never throwing.
 */
export function invokeProcessor(processor: Processor, ctx: RunContext, deadlineAt: number): Promise<Settled> {
  const { run } = ctx;
  const call = () => withCallOwner(run.jobId, () => Promise.resolve().then(() => processor(ctx)));
  return withDeferral(run.queue, () =>
    withLogFields({ tenantId: run.tenantId, traceId: currentTraceContext()?.traceId }, () =>
      runAsTenant(run.tenantId, call, deadlineAt),
    ),
  ).then(
    (result) => ({ type: "done" as const, result: result ?? {} }),
    (error: unknown) => ({ type: "error" as const, error }),
  );
}
