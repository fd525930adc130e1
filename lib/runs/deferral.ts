import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { SERVICE_WAIT_EVENT } from "@/lib/diagnosis/service-waits";
import type { Logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { kindSpec } from "@/lib/catalog/catalog";
import { parseProviderScope, parseScope, toProductionMs } from "@/lib/ratelimit/buckets";
import { isOutsideServiceDown, type OutsideServiceDown, type RateLimitDefer } from "@/lib/ratelimit/errors";
import { isBatchPending, type BatchPending } from "@/lib/core/signals";
import type { RunStart } from "./attempt";
import {
  batchWaitMessage,
  deferredEventTemplate,
  deferredMessage,
  pastMaximumAgeMessage,
  SECONDS_PATTERN,
  serviceWaitMessage,
} from "./deferral-messages";
import { finalizeJob } from "./finalize";

/**
 * What gives a run's slot back: a rate-limit window, an outside service that is down, or the
 * job's batch at the provider not done yet (./batch-lane.ts).
 */
export type DeferSignal = RateLimitDefer | OutsideServiceDown | BatchPending;

/** How a deferral ended: slot given back, past the kind's maximum age, or the row was no longer this run's. */
export type DeferralResult = "delayed" | "timed_out" | "fenced";

/**
 * Writes a deferred run down, fenced by its attempt, in one statement: the row becomes
 * `delayed` with "Waiting 47 s for statistics:tenant-42", its wake-up time, the slot time this
 * run used (the budget carries it over) and one more reschedule; a timeline event; the
 * per-minute rollup of reschedules and time lost for the tenant. A wait that would take the job
 * past its kind's maximum age ends it `timed_out` instead. Times on the row are production units.
 *
 * An outside service that is down (`OutsideServiceDown`) is waited out the same way, with three
 * differences. It is no rate-limit window (no rollup, no reschedule metric). Neither the wait nor
 * the time this run lost to the outage counts against the job's budget: the slot time charged is
 * the run's time less the part after the outage began (`since`: the last answer before a silence,
 * the first refused call, the misconfiguration) — calls that hung, or failed for the outage, were
 * not the job's work — so a job stopped at its deadline by a silent service resumes with the time
 * it lost. A kind with a maximum age (syncs) still ends `timed_out` past it; the others wait as
 * long as the service is down, which `BoundedOutsideServiceDown` pages a person about.
 * And its timeline gets a `service_wait` event dated when the wait really began (the later of the
 * run's start and the outage's), so the job page and the customer's page can say "waited for the
 * model service from … to …" (lib/diagnosis/service-waits.ts reads it with the next start).
 * A batch not done yet (`BatchPending`) is no rate-limit window either (no rollup, no reschedule
 * metric): the row says which batch it waits for and until when it looks again, and its slot time
 * is charged as usual (the wait is not, like any wait in *delayed*).
 * The words are built here in TypeScript (./deferral-messages.ts); the statement fills in only the
 * three numbers the row has once updated.
 */
export async function recordDeferral(
  run: Pick<RunStart, "jobId" | "attempt" | "queue" | "kind">,
  attemptStart: Date,
  defer: DeferSignal,
  log: Logger,
  now = new Date(),
): Promise<DeferralResult> {
  const deferral = deferralOf(run.kind, attemptStart, defer, now);
  const written = await writeDeferral(run, deferral, now);
  return deferralEnd(run, deferral, written, log);
}

/** What a deferral writes, worked out before the statement. */
interface Deferral {
  waitProductionMs: number;
  wakeUpAt: Date;
  outage: OutsideServiceDown | null;
  /** A rate-limit window's wait: rolled up per minute and counted as a reschedule. */
  rateLimit: boolean;
  scope: string;
  /** The rollup's endpoint family, and its tenant (null: the job's own, for a provider's scope shared by every tenant). */
  family: string;
  tenant: string | null;
  /** The row's message while it waits, and its timeline event's template (./deferral-messages.ts). */
  message: string;
  eventTemplate: string;
  /** When the wait really began (an outage: the later of the run's start and the outage's), and the time lost to it. */
  waitFrom: Date;
  lostProductionMs: number;
  /** Slot time charged to the budget: the run's, less what an outage took. */
  chargedMs: number;
  maxAge: { ms: number; realMs: number; advice: string } | null;
}

function deferralOf(kind: string, attemptStart: Date, defer: DeferSignal, now: Date): Deferral {
  const scale = env().BOUNDED_TIME_SCALE;
  const waitMs = Math.max(0, defer.waitMs);
  const waitProductionMs = toProductionMs(waitMs, scale);
  const slotProductionMs = Math.max(0, toProductionMs(now.getTime() - attemptStart.getTime(), scale));
  const outage = isOutsideServiceDown(defer) ? defer : null;
  const batch = isBatchPending(defer) ? defer : null;
  const scope = outage
    ? `outage:${outage.service}`
    : batch
      ? `batch:${batch.batchId}`
      : (defer as RateLimitDefer).scope;
  // A marketplace scope names its endpoint family and tenant; a provider scope (`provider:model`)
  // is shared by every tenant, so the rollup counts the wait for the job's own tenant.
  const provider = parseProviderScope(scope);
  const parsed = parseScope(scope);
  const message = batch
    ? batchWaitMessage(scope, batch.expectedBy, batch.lastMomentAt, waitProductionMs)
    : deferredMessage(outage ? { outage } : { outage: null, scope, provider, waitProductionMs });
  const waitFrom = outage
    ? new Date(Math.min(now.getTime(), Math.max(attemptStart.getTime(), outage.since.getTime())))
    : now;
  const lostProductionMs = outage ? Math.max(0, toProductionMs(now.getTime() - waitFrom.getTime(), scale)) : 0;
  const spec = kindSpec(kind);
  return {
    waitProductionMs,
    wakeUpAt: new Date(now.getTime() + Math.ceil(waitMs)),
    outage,
    rateLimit: !outage && !batch,
    scope,
    family: provider ? `provider:${provider}` : (parsed?.family ?? "unknown"),
    tenant: provider ? null : (parsed?.tenant ?? "unknown"),
    message,
    eventTemplate: deferredEventTemplate(message, slotProductionMs),
    waitFrom,
    lostProductionMs,
    chargedMs: Math.max(0, Math.round(slotProductionMs - lostProductionMs)),
    maxAge: spec?.maxAge ? { ms: spec.maxAge.ms, realMs: spec.maxAge.ms * scale, advice: spec.advice } : null,
  };
}

/** A Date as an ISO string for a `::timestamptz` parameter (UTC whatever the server's zone). */
const sql = (d: Date) => d.toISOString();

/**
 * One statement, one round trip: the row (fenced by the attempt, and only while the wait keeps
 * the job within its maximum age), its timeline event, an outage's `service_wait` event, and the
 * tenant's per-minute rollup of a rate-limit wait. The row as written, or undefined when it was not.
 */
async function writeDeferral(
  run: Pick<RunStart, "jobId" | "attempt" | "queue">,
  d: Deferral,
  now: Date,
): Promise<{ slotMsUsed: number } | undefined> {
  const { jobId, attempt } = run;
  const at = sql(now);
  const rows = await db().$queryRaw<{ slotMsUsed: number; budgetSoftMs: number; reschedules: number }[]>`
    WITH updated AS (
      UPDATE "Job"
      SET status = 'delayed', message = ${d.message}, "wakeUpAt" = ${sql(d.wakeUpAt)}::timestamptz AT TIME ZONE 'UTC', "heartbeatAt" = ${at}::timestamptz AT TIME ZONE 'UTC',
          "updatedAt" = ${at}::timestamptz AT TIME ZONE 'UTC', "slotMsUsed" = "slotMsUsed" + ${d.chargedMs}, reschedules = reschedules + 1
      WHERE id = ${jobId}::uuid AND attempt = ${attempt} AND status = 'running'
        AND (${d.maxAge?.realMs ?? null}::float8 IS NULL OR "createdAt" >= (${sql(d.wakeUpAt)}::timestamptz AT TIME ZONE 'UTC') - make_interval(secs => ${d.maxAge?.realMs ?? null}::float8 / 1000))
      RETURNING id, "tenantId", "slotMsUsed", "budgetSoftMs", reschedules
    ), event AS (
      INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
      SELECT id, ${at}::timestamptz AT TIME ZONE 'UTC', 'delayed', ${attempt},
             format(${d.eventTemplate}::text, to_char(round("slotMsUsed" / 1000.0), ${SECONDS_PATTERN}::text), to_char(round("budgetSoftMs" / 1000.0), ${SECONDS_PATTERN}::text), reschedules)
      FROM updated
    ), outage_wait AS (
      INSERT INTO "JobEvent" ("jobId", at, type, attempt, message)
      SELECT id, ${sql(d.waitFrom)}::timestamptz AT TIME ZONE 'UTC', ${SERVICE_WAIT_EVENT}, ${attempt},
             ${d.outage ? serviceWaitMessage(d.outage, d.lostProductionMs) : ""}
      FROM updated WHERE ${d.outage !== null}::boolean
    ), rollup AS (
      INSERT INTO "RateLimitRollup" (minute, queue, family, tenant, reschedules, "waitMs", "maxWaitMs")
      SELECT date_trunc('minute', ${at}::timestamptz AT TIME ZONE 'UTC'), ${run.queue}, ${d.family},
             coalesce(${d.tenant}::text, (SELECT slug FROM "Tenant" t WHERE t.id = updated."tenantId")), 1, ${d.waitProductionMs}, ${d.waitProductionMs} FROM updated
      WHERE ${d.rateLimit}::boolean
      ON CONFLICT (minute, queue, family, tenant) DO UPDATE
        SET reschedules = "RateLimitRollup".reschedules + 1,
            "waitMs" = "RateLimitRollup"."waitMs" + EXCLUDED."waitMs",
            "maxWaitMs" = greatest("RateLimitRollup"."maxWaitMs", EXCLUDED."maxWaitMs")
    )
    SELECT "slotMsUsed", "budgetSoftMs", reschedules FROM updated`;
  return rows[0];
}

/** How the deferral ended, logged and counted: delayed, ended past its maximum age, or fenced. */
async function deferralEnd(
  run: Pick<RunStart, "jobId" | "attempt" | "queue">,
  d: Deferral,
  written: { slotMsUsed: number } | undefined,
  log: Logger,
): Promise<DeferralResult> {
  const { scope, waitProductionMs } = d;
  if (!written && d.maxAge) {
    // Not written: another attempt owns the row, or the wait would take the job past its maximum age.
    const message = pastMaximumAgeMessage(scope, waitProductionMs, d.maxAge.ms, d.maxAge.advice);
    const status = await finalizeJob(run.jobId, run.attempt, { status: "timed_out", message, from: ["running"] });
    if (status) {
      log.warn(
        { scope, waitMs: waitProductionMs, maxAgeMs: d.maxAge.ms },
        "maximum age reached while waiting for a rate-limit window: job timed out",
      );
      return "timed_out";
    }
  }
  if (!written) {
    log.warn({ scope }, "deferred run no longer owns its row; not rescheduled");
    return "fenced";
  }
  if (d.outage) {
    log.info(
      {
        service: d.outage.service,
        waitMs: waitProductionMs,
        wakeUpAt: d.wakeUpAt.toISOString(),
        slotMsUsed: written.slotMsUsed,
      },
      "outside service down: slot given back until its next probe",
    );
    return "delayed";
  }
  if (!d.rateLimit) {
    log.info(
      { scope, waitMs: waitProductionMs, wakeUpAt: d.wakeUpAt.toISOString(), slotMsUsed: written.slotMsUsed },
      "batch at the provider not done yet: slot given back until the next look",
    );
    return "delayed";
  }
  metrics.rateLimitRescheduled({ queue: run.queue, family: d.family }, waitProductionMs / 1000);
  log.info(
    { scope, waitMs: waitProductionMs, wakeUpAt: d.wakeUpAt.toISOString(), slotMsUsed: written.slotMsUsed },
    "rate-limited: slot given back until the window opens",
  );
  return "delayed";
}
