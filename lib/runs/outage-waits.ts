import { QUEUES, type QueueName } from "@/lib/catalog/catalog";
import { logger } from "@/lib/log";
import { queue } from "@/lib/queues/queues";
import { cooldownRealMs, onServiceRecovered } from "@/lib/ratelimit/breaker";
import { OutsideServiceDown } from "@/lib/ratelimit/errors";
import { key, redis } from "@/lib/redis/client";

const log = logger("outage-waits");

/**
 * A job waiting for an outside service that is down looks again less often the longer the same
 * outage lasts, and is woken the moment the service answers again.
 *
 * The first time an outage finds a job, it waits until the breaker's next probe (one cool-down,
 * 30 production s), as before; each time the same outage finds it again, twice as long, up to
 * `MAX_COOLDOWNS` cool-downs (two production minutes). A job no longer resumes, finds the service
 * still down and goes back to *delayed* once a cool-down — a five-minute outage costs it three
 * or four resumes, not a dozen, and its timeline three or four waits. What it gives up — looking
 * in time — is given back by the waking: every job that waits is noted against the service, and
 * when a probe (any job's call after a cool-down) finds the service answering, the process that
 * made it promotes every noted job out of *delayed* at once.
 */

/** The longest wait between two looks at a service that stays down, in cool-downs. */
const MAX_COOLDOWNS = 4;
/** Real ms the counts of an outage and the list of waiters are kept after their last change. */
const KEEP_MS = 24 * 3_600_000;

/** One outage (a service since a moment): how many times it has sent each job back to wait. */
const outageKey = (down: OutsideServiceDown) => key("outage", down.service, String(down.since.getTime()), "waits");
/** The jobs waiting for a service, as `queue|jobId`: woken when it answers again. */
export const waitersKey = (service: string) => key("outage", service, "waiters");

/**
 * The wait of a job that found a service down (`down`), grown for an outage that has found it
 * before, with the job noted to be woken when the service answers. Redis away: the breaker's
 * wait, as it says.
 */
export async function outageWait(
  down: OutsideServiceDown,
  jobId: string,
  queueName: string,
): Promise<OutsideServiceDown> {
  try {
    const replies = await redis()
      .multi()
      .hincrby(outageKey(down), jobId, 1)
      .pexpire(outageKey(down), KEEP_MS)
      .sadd(waitersKey(down.service), `${queueName}|${jobId}`)
      .pexpire(waitersKey(down.service), KEEP_MS)
      .exec();
    const times = Number(replies?.[0]?.[1] ?? 1);
    const cooldown = cooldownRealMs();
    const grown = cooldown * Math.min(MAX_COOLDOWNS, 2 ** Math.max(0, times - 1));
    if (grown <= down.waitMs) return down;
    return new OutsideServiceDown(down.service, grown, down.since, down.error, down.serviceName);
  } catch (err) {
    log.warn(
      { err, service: down.service, jobId },
      "could not note a job waiting for a service; it waits for the breaker's next probe",
    );
    return down;
  }
}

/** Promotes every job noted as waiting for `service` out of *delayed*; returns how many were woken. */
export async function wakeOutageWaiters(service: string): Promise<number> {
  const members = await redis().spop(waitersKey(service), 100_000);
  let woken = 0;
  for (const member of members) {
    const [name, jobId] = member.split("|");
    if (!name || !jobId || !Object.hasOwn(QUEUES, name)) continue;
    const job = await queue(name as QueueName).getJob(jobId);
    if (!job || !(await job.isDelayed())) continue;
    // Promoted by another process first, or started meanwhile: nothing to wake.
    await job.promote().then(
      () => woken++,
      () => undefined,
    );
  }
  return woken;
}

/** From now on, this process wakes a service's waiting jobs when it sees the service answer again. Returns the function that stops it. */
export function wakeWaitersOnRecovery(): () => void {
  return onServiceRecovered((service) => {
    wakeOutageWaiters(service).then(
      (woken) => log.info({ service, woken }, "the service answers again: its waiting jobs were woken"),
      (err: unknown) =>
        log.warn({ err, service }, "could not wake the jobs waiting for a service; they look again on their own"),
    );
  });
}
