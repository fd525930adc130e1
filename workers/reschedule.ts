import { DelayedError, type Job as QueueJob } from "bullmq";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { finalizeJob, fmtSeconds, progressPhrase, type FinalRow, type RunStart } from "@/lib/jobs/run";
import type { Logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { KINDS, type JobKind, type QueueName } from "@/lib/queues/catalog";
import { parseScope, toProductionMs } from "@/lib/ratelimit/buckets";
import { runWithRateLimitDeferral } from "@/lib/ratelimit/context";
import { isRateLimitDefer } from "@/lib/ratelimit/errors";
import { deferThresholdMs } from "@/lib/ratelimit/limiter";

/**
 * The reschedule policy: a job of these queues that must wait longer than the deferral threshold
 * for a rate-limit window gives its worker slot back — the queue job moves to *delayed* for
 * exactly the wait, without spending a retry attempt — instead of sleeping in the slot.
 */
export const RESCHEDULE_QUEUES: ReadonlySet<QueueName> = new Set<QueueName>(["marketplace-sync"]);

export function reschedules(queueName: string): boolean {
  return RESCHEDULE_QUEUES.has(queueName as QueueName);
}

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
 * The processor wrapper of a queue under the reschedule policy, and the only place a deferral
 * context is opened: inside `run`, the limiter turns a wait over the threshold into
 * `RateLimitDefer`; here it becomes `moveToDelayed(now + waitMs)` + `DelayedError`, which BullMQ
 * takes as "not finished, not failed": `attemptsMade` stays as it was. The runtime has already
 * written the row (`delayed`, what it waits for, until when) before the error reaches here.
 */
export async function runRescheduling(queueJob: QueueJob, token: string | undefined, run: () => Promise<void>): Promise<void> {
  try {
    await runWithRateLimitDeferral(deferThresholdMs(), run);
  } catch (err) {
    if (!isRateLimitDefer(err)) throw err;
    // Back in a slot a little before the window opens: taking the slot and starting the attempt
    // take that long, and a bucket that refills to capacity while nobody asks loses the time.
    // The limiter still gates the request; what is left of the wait is slept (below the threshold).
    // At most the threshold, so what is left on waking is slept rather than deferred again.
    const lead = Math.min(RESUME_LEAD_MS, deferThresholdMs(), err.waitMs / 2);
    await queueJob.moveToDelayed(Date.now() + Math.ceil(err.waitMs - lead), token);
    throw new DelayedError();
  }
}

/**
 * Real milliseconds a rescheduled job is woken before its wait ends: about what a resume costs
 * (queue promotion, a worker slot, starting the attempt — a few database round trips). Not
 * time-scaled: machine latency does not shrink with the time scale.
 */
export const RESUME_LEAD_MS = 150;

export type RescheduleOutcome = "delayed" | "timed_out" | "fenced";

/** A Date as an ISO string for a `::timestamptz` parameter (UTC whatever the server's zone). */
const sql = (d: Date) => d.toISOString();

const fmtWait = (productionMs: number) => `${Math.max(1, Math.ceil(productionMs / 1000)).toLocaleString("en-US")} s`;

function fmtAge(productionMs: number): string {
  const h = productionMs / 3600_000;
  return h >= 1 ? `${Number.isInteger(h) ? h : h.toFixed(1)} h` : `${Math.round(productionMs / 60_000)} min`;
}

/**
 * Writes a deferred run down, fenced by its attempt, in one statement: the row becomes
 * `delayed` with "Waiting 47 s for statistics:tenant-42", its wake-up time, the slot time this
 * run used (the budget carries it over) and one more reschedule; a timeline event; the
 * per-minute rollup of reschedules and time lost for the tenant. A wait that would take the job
 * past its kind's maximum age ends it `timed_out` instead. Times on the row are production units.
 */
export async function rescheduleRun(run: Pick<RunStart, "jobId" | "attempt" | "queue" | "kind">, attemptStart: Date, defer: Error, log: Logger, now = new Date()): Promise<RescheduleOutcome> {
  if (!isRateLimitDefer(defer)) throw defer;
  const { jobId, attempt } = run;
  const scale = env().BOUNDED_TIME_SCALE;
  const waitMs = Math.max(0, defer.waitMs);
  const waitProductionMs = toProductionMs(waitMs, scale);
  const slotProductionMs = Math.max(0, toProductionMs(now.getTime() - attemptStart.getTime(), scale));
  const wakeUpAt = new Date(now.getTime() + Math.ceil(waitMs));
  const parsed = parseScope(defer.scope);
  const family = parsed?.family ?? "unknown";
  const tenant = parsed?.tenant ?? "unknown";
  const spec = KINDS[run.kind as JobKind];

  // One statement, one round trip: the row (fenced by the attempt, and only while the wait keeps
  // the job within its maximum age), its timeline event and the tenant's per-minute rollup.
  const message = `Waiting ${fmtWait(waitProductionMs)} for ${defer.scope} (the marketplace's rate limit); it resumes by itself.`;
  const maxAgeRealMs = spec?.maxAge ? spec.maxAge.ms * scale : null;
  const at = sql(now);
  const rows = await db().$queryRaw<{ slotMsUsed: number; budgetSoftMs: number; reschedules: number }[]>`
    WITH updated AS (
      UPDATE "Job"
      SET status = 'delayed', message = ${message}, "wakeUpAt" = ${sql(wakeUpAt)}::timestamptz AT TIME ZONE 'UTC', "heartbeatAt" = ${at}::timestamptz AT TIME ZONE 'UTC',
          "updatedAt" = ${at}::timestamptz AT TIME ZONE 'UTC', "slotMsUsed" = "slotMsUsed" + ${slotProductionMs}, reschedules = reschedules + 1
      WHERE id = ${jobId}::uuid AND attempt = ${attempt} AND status = 'running'
        AND (${maxAgeRealMs}::float8 IS NULL OR "createdAt" >= (${sql(wakeUpAt)}::timestamptz AT TIME ZONE 'UTC') - make_interval(secs => ${maxAgeRealMs}::float8 / 1000))
      RETURNING id, "slotMsUsed", "budgetSoftMs", reschedules
    ), event AS (
      INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
      SELECT id, ${at}::timestamptz AT TIME ZONE 'UTC', 'delayed', ${attempt},
             ${message} || ' Gave its worker slot back after ' || ${fmtSeconds(slotProductionMs)} || '; ' || round("slotMsUsed" / 1000.0) || ' s of its '
               || round("budgetSoftMs" / 1000.0) || ' s budget used so far (reschedule ' || reschedules || ').'
      FROM updated
    ), rollup AS (
      INSERT INTO "RateLimitRollup" (minute, queue, family, tenant, reschedules, "waitMs", "maxWaitMs")
      SELECT date_trunc('minute', ${at}::timestamptz AT TIME ZONE 'UTC'), ${run.queue}, ${family}, ${tenant}, 1, ${waitProductionMs}, ${waitProductionMs} FROM updated
      ON CONFLICT (minute, queue, family, tenant) DO UPDATE
        SET reschedules = "RateLimitRollup".reschedules + 1,
            "waitMs" = "RateLimitRollup"."waitMs" + EXCLUDED."waitMs",
            "maxWaitMs" = greatest("RateLimitRollup"."maxWaitMs", EXCLUDED."maxWaitMs")
    )
    SELECT "slotMsUsed", "budgetSoftMs", reschedules FROM updated`;
  const written = rows[0];

  if (!written && spec?.maxAge) {
    // Not written: another attempt owns the row, or the wait would take the job past its maximum age.
    const message = (row: FinalRow) =>
      `Timed out after ${progressPhrase(row)}: waiting ${fmtWait(waitProductionMs)} more for ${defer.scope} would take it past its maximum age of ${fmtAge(spec.maxAge!.ms)} (waits for rate-limit windows count there, not in its budget). ${spec.advice}`;
    const status = await finalizeJob(jobId, attempt, { status: "timed_out", message, from: ["running"] });
    if (status) {
      log.warn({ scope: defer.scope, waitMs: waitProductionMs, maxAgeMs: spec.maxAge.ms }, "maximum age reached while waiting for a rate-limit window: job timed out");
      return "timed_out";
    }
  }
  if (!written) {
    log.warn({ scope: defer.scope }, "deferred run no longer owns its row; not rescheduled");
    return "fenced";
  }
  metrics.rateLimitRescheduled({ queue: run.queue, family }, waitProductionMs / 1000);
  log.info({ scope: defer.scope, waitMs: waitProductionMs, wakeUpAt: wakeUpAt.toISOString(), slotMsUsed: written.slotMsUsed }, "rate-limited: slot given back until the window opens");
  return "delayed";
}
