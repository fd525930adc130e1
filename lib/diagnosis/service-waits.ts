import { serviceName, OUTSIDE_SERVICES, type OutsideService } from "@/lib/ratelimit/breaker-services";

/**
 * When a job waited for an outside service that was down, silent or misconfigured, from its
 * timeline: each wait is a `service_wait` event (written by the deferral, dated when the wait
 * really began, beside the deferral's `delayed` event) and ends when the job next ran. A resume
 * writes no event of its own (it goes on with its attempt, lib/runs/attempt.ts), so the next run's
 * start is known from what comes after the deferral: a new attempt's `started` event, the next
 * wait (dated at that run's start when the outage was older), the next deferral, or — for the last
 * wait — the row's latest start. Waits of one outage — a probe that failed again, so the job
 * deferred once more as soon as it started — are one wait.
 */

/** The timeline event type of a wait for an outside service (lib/runs/reschedule.ts writes it). */
export const SERVICE_WAIT_EVENT = "service_wait";

/** Two waits this close (real ms) are one: the job started, found the service still down and deferred again. */
const SAME_OUTAGE_GAP_MS = 2_000;

export interface ServiceWait {
  service: OutsideService;
  /** "the model service". */
  serviceName: string;
  /** ISO time the wait began. */
  from: string;
  /** ISO time the job started again; null while it still waits. */
  to: string | null;
}

interface TimelineEvent {
  at: string | Date;
  type: string;
  message: string;
}

/** The service a wait's message names ("Waiting for the model service (…)"). */
function serviceOf(message: string): OutsideService | null {
  return OUTSIDE_SERVICES.find((s) => message.startsWith(`Waiting for ${serviceName(s)}`)) ?? null;
}

/** Events that a run started before: a new attempt, or a resumed one's next wait or deferral. */
const AFTER_A_START = new Set(["started", SERVICE_WAIT_EVENT, "delayed"]);

/**
 * The waits of a job's timeline (`events`: at least its `service_wait`, `delayed` and `started`
 * events); `lastStartedAt`, when its latest run started (the row's `attemptStartedAt`).
 */
export function serviceWaitsOf(events: readonly TimelineEvent[], lastStartedAt: string | Date | null): ServiceWait[] {
  const ms = (at: string | Date) => new Date(at).getTime();
  const sorted = [...events].sort((a, b) => ms(a.at) - ms(b.at));
  const starts = [
    ...sorted.filter((e) => AFTER_A_START.has(e.type)).map((e) => ms(e.at)),
    ...(lastStartedAt ? [ms(lastStartedAt)] : []),
  ].sort((a, b) => a - b);
  const waits: (ServiceWait & { fromMs: number; toMs: number | null })[] = [];
  for (const e of sorted) {
    if (e.type !== SERVICE_WAIT_EVENT) continue;
    const service = serviceOf(e.message);
    if (!service) continue;
    const fromMs = ms(e.at);
    // The deferral that began this wait: its `delayed` event, written with it (dated at or after it).
    const deferredMs = sorted.find((d) => d.type === "delayed" && ms(d.at) >= fromMs)?.at;
    const after = deferredMs === undefined ? fromMs : ms(deferredMs);
    const toMs = starts.find((t) => t > after) ?? null;
    const last = waits.at(-1);
    if (last && last.service === service && last.toMs !== null && fromMs - last.toMs <= SAME_OUTAGE_GAP_MS) {
      last.toMs = toMs;
      last.to = toMs === null ? null : new Date(toMs).toISOString();
      continue;
    }
    waits.push({
      service,
      serviceName: serviceName(service),
      from: new Date(fromMs).toISOString(),
      to: toMs === null ? null : new Date(toMs).toISOString(),
      fromMs,
      toMs,
    });
  }
  return waits.map(({ service, serviceName, from, to }) => ({ service, serviceName, from, to }));
}

/** "Waited for the model service from 14:02:10 to 14:07:31 UTC (5 min 21 s)." — or "… since 14:02:10 UTC" while it waits. */
export function serviceWaitSentence(wait: ServiceWait, formatDuration: (ms: number) => string): string {
  const clock = (iso: string) => iso.slice(11, 19);
  if (!wait.to)
    return `Waiting for ${wait.serviceName} since ${clock(wait.from)} UTC; it goes on by itself when the service answers.`;
  return `Waited for ${wait.serviceName} from ${clock(wait.from)} to ${clock(wait.to)} UTC (${formatDuration(new Date(wait.to).getTime() - new Date(wait.from).getTime())}).`;
}
