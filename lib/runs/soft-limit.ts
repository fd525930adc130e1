import type { Logger } from "@/lib/log";
import { DeadlineExceeded } from "@/lib/core/signals";
import { timedOutMessage } from "@/lib/jobs/messages";
import { kindSpec } from "@/lib/catalog/catalog";
import { breakers } from "@/lib/ratelimit/breaker";
import { routeFor } from "@/lib/model-providers";
import { OUTSIDE_SERVICES, type OutsideService } from "@/lib/ratelimit/breaker-services";
import type { ServiceNeeded } from "@/lib/ratelimit/breaker";
import type { OutsideServiceDown } from "@/lib/ratelimit/errors";
import type { RunStart } from "./attempt";
import { finalizeJob } from "./finalize";
import { finalizeBeforeAbort, timerAt, type HardLimit, type RunLimits } from "./limits";
import type { HardLimitWatch } from "./processor";

/** What the soft limit shares with the rest of the run's deadline. */
export interface SoftLimit {
  /** From the soft limit until its verdict nothing new is dispatched (the item loop's `dispatchHold`). */
  dispatchHold(): Promise<void>;
  /** The outage the run was stopped for at its soft limit, if that was the verdict. */
  outage(): OutsideServiceDown | null;
  /** The verdict under way, if the soft limit fell: the outcome is decided once it is done. */
  fired(): Promise<void> | undefined;
  clear(): void;
}

export interface SoftLimitInput {
  run: RunStart;
  limits: RunLimits;
  hard: HardLimit;
  deadline: AbortController;
  /** True once the processor settled: a verdict reached after that writes nothing. */
  settled(): boolean;
  log: Logger;
  watch?: HardLimitWatch;
}

/**
 * Arms the soft limit. When it falls, the verdict: the row is finalized `timed_out` first, then
 * the job's signal aborts with `DeadlineExceeded` — unless the job's outside service is down.
 */
export function armSoftLimit(input: SoftLimitInput): SoftLimit {
  let fired: Promise<void> | undefined;
  let outage: OutsideServiceDown | null = null;
  let held: Promise<void> | null = null;
  const timer = timerAt(input.limits.startedAt, input.limits.softMs, () => {
    let release = () => {};
    held = new Promise<void>((resolve) => (release = resolve));
    fired = softLimitVerdict(input)
      .then((down) => {
        outage = down;
      })
      // Decided, and the signal aborted (or the run had ended): the loop sees the signal from here.
      .finally(release);
  });
  return {
    dispatchHold: () => held ?? Promise.resolve(),
    outage: () => outage,
    fired: () => fired,
    clear: () => timer.clear(),
  };
}

/**
 * A deadline that falls while the job's service is down (its breaker open or misconfigured, or
 * silent with this job's calls among the unanswered) is not the job's timeout: the run gives its
 * slot back and waits for the service like any outage wait (deferred), and the time lost to it is
 * not charged to its budget (./deferral.ts). Whether calls the job has out are silence or the long
 * tail is known once they have waited past the service's threshold: `downFor` waits that long at
 * most (items in flight go on, nothing new is dispatched), and the hard limit moves by the same
 * time, so the wait never turns into a kill. Returns the outage when that is the verdict.
 */
async function softLimitVerdict({
  run,
  limits,
  hard,
  deadline,
  settled,
  log,
  watch,
}: SoftLimitInput): Promise<OutsideServiceDown | null> {
  hard.clear();
  const outage = await breakers()
    .downFor(run.jobId, servicesOf(run.kind))
    .catch(() => null);
  // The run ended on its own while the verdict was awaited (its last call answered): it is settled
  // as it ended, never written timed_out afterwards, and no watchdog entry or hard timer outlives it.
  if (settled()) return null;
  const windDownMs = limits.hardMs - limits.softMs;
  hard.rearm(windDownMs);
  watch?.start({ jobId: run.jobId, attempt: run.attempt, hardAt: Date.now() + windDownMs, kind: run.kind });
  if (outage) {
    log.warn(
      { service: outage.service, error: outage.error },
      "soft limit reached while its outside service is down: waiting for the service, not timed out",
    );
    deadline.abort(outage);
    return outage;
  }
  const timedOut = finalizeJob(run.jobId, run.attempt, {
    status: "timed_out",
    message: timedOutMessage,
    from: ["running"],
    known: run,
  });
  if (await finalizeBeforeAbort(timedOut, log, "could not finalize the timed-out row"))
    log.warn({ softMs: run.budgetSoftMs }, "soft limit reached: job timed out");
  deadline.abort(new DeadlineExceeded(run.jobId, run.budgetSoftMs));
  return null;
}

/**
 * The outside services a kind's items call, from the catalog (its `provider`): for the model, the
 * providers on the kind's route — alternatives, down only when all are (lib/model-providers.ts) —
 * and the model's too for OCR, whose documents get a model pass.
 */
function servicesOf(kind: string): ServiceNeeded[] {
  const provider = kindSpec(kind)?.provider;
  const route = routeFor(kind).map((p) => p.service);
  const model: ServiceNeeded = route.length === 1 ? route[0]! : route;
  if (provider === "model") return [model];
  if (provider === "ocr") return ["ocr", model];
  return (OUTSIDE_SERVICES as readonly string[]).includes(provider ?? "") ? [provider as OutsideService] : [];
}
