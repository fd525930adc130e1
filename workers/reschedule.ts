import type { Job as QueueJob } from "bullmq";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import type { FinalRow } from "@/lib/jobs/finalize-statement";
import { formatDuration, formatSeconds, formatWaitSeconds } from "@/lib/format/duration";
import { progressPhrase } from "@/lib/jobs/messages";
import { finalizeJob, type RunStart } from "@/lib/jobs/run";
import type { Logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { kindSpec, reschedules } from "@/lib/queues/catalog";
import { parseProviderScope, parseScope, toProductionMs } from "@/lib/ratelimit/buckets";
import { runWithRateLimitDeferral } from "@/lib/ratelimit/context";
import { isOutsideServiceDown, type OutsideServiceDown, type RateLimitDefer } from "@/lib/ratelimit/errors";
import { deferThresholdMs } from "@/lib/ratelimit/limiter";
import { scaled } from "@/lib/time";

/**
 * The reschedule policy, whole: a job of a queue the catalog marks `reschedule` that must wait
 * longer than the deferral threshold for a rate-limit window gives its worker slot back — the
 * queue job moves to *delayed* for exactly the wait, without spending a retry attempt — instead of
 * sleeping in the slot. This module owns every part of it:
 * - where the deferral context is opened (`withDeferral`): only around those queues' runs, so the
 *   limiter turns a long wait into `RateLimitDefer` there and sleeps it out everywhere else;
 * - the budget's carry-over (`slotClockStart`): a resumed run counts the slot time earlier runs used;
 * - what a deferral writes and what happens to the queue job (`deferRun`): the row `delayed` with
 *   what it waits for, the maximum-age check, the wake-up a little before the window opens, and
 *   `moveToDelayed` without spending an attempt;
 * - the BullMQ worker options of those queues (`rescheduleWorkerOptions`).
 * Processors only let the typed deferral through; they resume at their cursor like any run.
 */

/**
 * BullMQ's `maxStartedAttempts` for those queues: every reschedule is one more start of the same
 * queue job, so an unbounded count is how a job that re-delays itself forever would look. A
 * legitimate sync waits at least the 5 s threshold per reschedule and lives at most its maximum
 * age (6 h): at most 4,320 starts. 10,000 never fails a throttled sync and still ends a loop.
 */
export const MAX_STARTED_ATTEMPTS = 10_000;

/** Worker options of a queue under the reschedule policy (none for the others). */
export function rescheduleWorkerOptions(queueName: string): { maxStartedAttempts?: number } {
  return reschedules(queueName) ? { maxStartedAttempts: MAX_STARTED_ATTEMPTS } : {};
}

/**
 * Runs `fn` (a run's processor) in the deferral context when its queue reschedules: inside it,
 * the limiter throws `RateLimitDefer` for a wait over the threshold. Other queues' runs sleep
 * their waits in the slot, as an HTTP request would get a 429.
 */
export function withDeferral<T>(queueName: string, fn: () => Promise<T>): Promise<T> {
  return reschedules(queueName) ? runWithRateLimitDeferral(deferThresholdMs(), fn) : fn();
}

/**
 * Real time (ms since the epoch) from which a run's limits count: the attempt's start, moved back
 * by the slot time its earlier runs used (production ms on the row). The budget counts time in a
 * worker slot, not time spent waiting in delayed.
 */
export function slotClockStart(attemptStart: Date, slotMsUsed: number): number {
  return attemptStart.getTime() - scaled(slotMsUsed);
}

/**
 * Real milliseconds a rescheduled job is woken before its wait ends: about what a resume costs
 * (queue promotion, a worker slot, starting the attempt — a few database round trips). Not
 * time-scaled: machine latency does not shrink with the time scale.
 */
const RESUME_LEAD_MS = 150;

/**
 * When the queue job should be back in a slot: a little before the window opens, since taking
 * the slot and starting the attempt take that long and a bucket that refills while nobody asks
 * loses the time. The limiter still gates the request; what is left of the wait is slept. The
 * lead is at most the threshold, so what is left on waking is slept rather than deferred again.
 */
function wakeUpDelayMs(waitMs: number): number {
  const lead = Math.min(RESUME_LEAD_MS, deferThresholdMs(), waitMs / 2);
  return Math.ceil(waitMs - lead);
}

/** How a deferral ended: slot given back, past the kind's maximum age, or the row was no longer this run's. */
export type DeferralResult = "delayed" | "timed_out" | "fenced";

/** A Date as an ISO string for a `::timestamptz` parameter (UTC whatever the server's zone). */
const sql = (d: Date) => d.toISOString();

/**
 * A run deferred by the limiter: writes it down and, when it was written, moves the queue job to
 * *delayed* until its wake-up without spending an attempt (BullMQ's `moveToDelayed` with the
 * lock token; the caller then throws `DelayedError`, which BullMQ takes as "not finished, not
 * failed"). Without a token (a run started outside a BullMQ worker) the queue job is the caller's.
 */
export async function deferRun(
  run: Pick<RunStart, "jobId" | "attempt" | "queue" | "kind">,
  attemptStart: Date,
  defer: RateLimitDefer | OutsideServiceDown,
  log: Logger,
  queueJob: QueueJob,
  token: string | undefined,
): Promise<DeferralResult> {
  const result = await recordDeferral(run, attemptStart, defer, log);
  if (result === "delayed" && token !== undefined) await queueJob.moveToDelayed(Date.now() + wakeUpDelayMs(defer.waitMs), token);
  return result;
}

/**
 * Writes a deferred run down, fenced by its attempt, in one statement: the row becomes
 * `delayed` with "Waiting 47 s for statistics:tenant-42", its wake-up time, the slot time this
 * run used (the budget carries it over) and one more reschedule; a timeline event; the
 * per-minute rollup of reschedules and time lost for the tenant. A wait that would take the job
 * past its kind's maximum age ends it `timed_out` instead. Times on the row are production units.
 *
 * An outside service that is down (`OutsideServiceDown`) is waited out the same way, with two
 * differences: the wait counts against the job's budget like any wait in its slot would (it is
 * added to the slot time), and it is no rate-limit window (no rollup, no reschedule metric).
 */
async function recordDeferral(
  run: Pick<RunStart, "jobId" | "attempt" | "queue" | "kind">,
  attemptStart: Date,
  defer: RateLimitDefer | OutsideServiceDown,
  log: Logger,
  now = new Date(),
): Promise<DeferralResult> {
  const { jobId, attempt } = run;
  const scale = env().BOUNDED_TIME_SCALE;
  const waitMs = Math.max(0, defer.waitMs);
  const waitProductionMs = toProductionMs(waitMs, scale);
  const slotProductionMs = Math.max(0, toProductionMs(now.getTime() - attemptStart.getTime(), scale));
  const wakeUpAt = new Date(now.getTime() + Math.ceil(waitMs));
  const outage = isOutsideServiceDown(defer) ? defer : null;
  const scope = isOutsideServiceDown(defer) ? `outage:${defer.service}` : defer.scope;
  // A marketplace scope names its endpoint family and tenant; a provider scope (`provider:model`)
  // is shared by every tenant, so the rollup counts the wait for the job's own tenant.
  const provider = parseProviderScope(scope);
  const parsed = parseScope(scope);
  const family = provider ? `provider:${provider}` : (parsed?.family ?? "unknown");
  const tenant = provider ? null : (parsed?.tenant ?? "unknown");
  const what = provider ? `the ${provider} provider's limit on calls at once and per second` : "the marketplace's rate limit";
  const spec = kindSpec(run.kind);
  const maxAge = spec?.maxAge;

  // One statement, one round trip: the row (fenced by the attempt, and only while the wait keeps
  // the job within its maximum age), its timeline event and the tenant's per-minute rollup.
  const message = outage
    ? `Waiting for ${outage.serviceName}, down since ${outage.since.toISOString()} (${outage.error}); it resumes by itself, and nothing is failed for it.`
    : `Waiting ${formatWaitSeconds(waitProductionMs)} for ${scope} (${what}); it resumes by itself.`;
  const chargedMs = slotProductionMs + (outage ? waitProductionMs : 0);
  const maxAgeRealMs = maxAge ? maxAge.ms * scale : null;
  const at = sql(now);
  const rows = await db().$queryRaw<{ slotMsUsed: number; budgetSoftMs: number; reschedules: number }[]>`
    WITH updated AS (
      UPDATE "Job"
      SET status = 'delayed', message = ${message}, "wakeUpAt" = ${sql(wakeUpAt)}::timestamptz AT TIME ZONE 'UTC', "heartbeatAt" = ${at}::timestamptz AT TIME ZONE 'UTC',
          "updatedAt" = ${at}::timestamptz AT TIME ZONE 'UTC', "slotMsUsed" = "slotMsUsed" + ${chargedMs}, reschedules = reschedules + 1
      WHERE id = ${jobId}::uuid AND attempt = ${attempt} AND status = 'running'
        AND (${maxAgeRealMs}::float8 IS NULL OR "createdAt" >= (${sql(wakeUpAt)}::timestamptz AT TIME ZONE 'UTC') - make_interval(secs => ${maxAgeRealMs}::float8 / 1000))
      RETURNING id, "tenantId", "slotMsUsed", "budgetSoftMs", reschedules
    ), event AS (
      INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
      SELECT id, ${at}::timestamptz AT TIME ZONE 'UTC', 'delayed', ${attempt},
             ${message} || ' Gave its worker slot back after ' || ${formatSeconds(slotProductionMs)} || '; ' || round("slotMsUsed" / 1000.0) || ' s of its '
               || round("budgetSoftMs" / 1000.0) || ' s budget used so far (reschedule ' || reschedules || ').'
      FROM updated
    ), rollup AS (
      INSERT INTO "RateLimitRollup" (minute, queue, family, tenant, reschedules, "waitMs", "maxWaitMs")
      SELECT date_trunc('minute', ${at}::timestamptz AT TIME ZONE 'UTC'), ${run.queue}, ${family},
             coalesce(${tenant}::text, (SELECT slug FROM "Tenant" t WHERE t.id = updated."tenantId")), 1, ${waitProductionMs}, ${waitProductionMs} FROM updated
      WHERE ${outage === null}::boolean
      ON CONFLICT (minute, queue, family, tenant) DO UPDATE
        SET reschedules = "RateLimitRollup".reschedules + 1,
            "waitMs" = "RateLimitRollup"."waitMs" + EXCLUDED."waitMs",
            "maxWaitMs" = greatest("RateLimitRollup"."maxWaitMs", EXCLUDED."maxWaitMs")
    )
    SELECT "slotMsUsed", "budgetSoftMs", reschedules FROM updated`;
  const written = rows[0];

  if (!written && maxAge) {
    // Not written: another attempt owns the row, or the wait would take the job past its maximum age.
    const message = (row: FinalRow) =>
      `Timed out after ${progressPhrase(row)}: waiting ${formatWaitSeconds(waitProductionMs)} more for ${scope} would take it past its maximum age of ${formatDuration(maxAge.ms)} (waits for rate-limit windows count there, not in its budget). ${spec.advice}`;
    const status = await finalizeJob(jobId, attempt, { status: "timed_out", message, from: ["running"] });
    if (status) {
      log.warn({ scope, waitMs: waitProductionMs, maxAgeMs: maxAge.ms }, "maximum age reached while waiting for a rate-limit window: job timed out");
      return "timed_out";
    }
  }
  if (!written) {
    log.warn({ scope }, "deferred run no longer owns its row; not rescheduled");
    return "fenced";
  }
  if (outage) {
    log.info({ service: outage.service, waitMs: waitProductionMs, wakeUpAt: wakeUpAt.toISOString(), slotMsUsed: written.slotMsUsed }, "outside service down: slot given back until its next probe");
    return "delayed";
  }
  metrics.rateLimitRescheduled({ queue: run.queue, family }, waitProductionMs / 1000);
  log.info({ scope, waitMs: waitProductionMs, wakeUpAt: wakeUpAt.toISOString(), slotMsUsed: written.slotMsUsed }, "rate-limited: slot given back until the window opens");
  return "delayed";
}
