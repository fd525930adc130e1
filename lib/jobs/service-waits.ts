import { SERVICE_NAMES, OUTSIDE_SERVICES, type OutsideService } from "@/lib/ratelimit/breaker-services";

/**
 * When a job waited for an outside service that was down, silent or misconfigured, from its
 * timeline: each wait is a `service_wait` event (written by the deferral, dated when the wait
 * really began) and ends at the next attempt's start. Waits of one outage — a probe that failed
 * again, so the job deferred once more as soon as it started — are one wait.
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
  attempt: number;
  message: string;
}

/** The service a wait's message names ("Waiting for the model service (…)"). */
function serviceOf(message: string): OutsideService | null {
  return OUTSIDE_SERVICES.find((s) => message.startsWith(`Waiting for ${SERVICE_NAMES[s]}`)) ?? null;
}

export function serviceWaitsOf(events: readonly TimelineEvent[]): ServiceWait[] {
  const ms = (at: string | Date) => new Date(at).getTime();
  const sorted = [...events].sort((a, b) => ms(a.at) - ms(b.at));
  const waits: (ServiceWait & { fromMs: number; toMs: number | null })[] = [];
  for (const e of sorted) {
    if (e.type !== SERVICE_WAIT_EVENT) continue;
    const service = serviceOf(e.message);
    if (!service) continue;
    const resumed = sorted.find((s) => s.type === "started" && s.attempt > e.attempt);
    const fromMs = ms(e.at);
    const toMs = resumed ? ms(resumed.at) : null;
    const last = waits.at(-1);
    if (last && last.service === service && last.toMs !== null && fromMs - last.toMs <= SAME_OUTAGE_GAP_MS) {
      last.toMs = toMs;
      last.to = toMs === null ? null : new Date(toMs).toISOString();
      continue;
    }
    waits.push({
      service,
      serviceName: SERVICE_NAMES[service],
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
