import { countStuckByKind } from "@/lib/reports/stuck";
import { countAwaitingOperatorByKind } from "@/lib/reports/stuck-awaiting";
import { RETENTION_CLASS_NAMES } from "@/lib/retention/policy";
import { retentionStatus } from "@/lib/retention/status";
import { oldestDeletionSeconds } from "@/lib/tenants/being-deleted";
import { getCallAllowance } from "@/lib/modelcalls/allowance";
import { catalogPairs, KINDS, kindsOfQueue, RESCHEDULE_QUEUES } from "@/lib/catalog/catalog";
import {
  installLabelValues,
  installScrapeSources,
  type BoundedMetrics,
  type DomainLabelValues,
  type CallAllowanceReading,
  type ListCallAllowances,
  type ScrapeSources,
} from "@/lib/metrics/metrics";
import { readQueueGauges } from "@/lib/queues/overview";
import type { ReleaseResult, ReserveKind } from "@/lib/quota/reserves";
import { sweepPolicy } from "@/lib/quota/settings";
import { readBreakers } from "@/lib/ratelimit/breaker";
import { BREAKER_STATES, outsideServices } from "@/lib/ratelimit/breaker-services";
import { FAMILIES, LIMITED_PROVIDERS, limitedProviders } from "@/lib/ratelimit/buckets";

/**
 * What the metrics learn from the domains: where the scrape-time gauges read the database and the
 * settings, and the label values some counters start at 0. Kept out of lib/metrics/metrics.ts so
 * that the registry imports no domain module: everything that records a metric (the job runtime,
 * the reaper, the limiters, the reserves) can import it without a cycle back through the readers.
 */

/** The reserve kinds and late-release resolutions of lib/quota/reserves, as label values. */
const RESERVE_KINDS = ["generate", "dislike"] as const satisfies readonly ReserveKind[];
const LATE_RESOLUTIONS = ["charged", "debt", "none"] as const satisfies readonly Extract<
  ReleaseResult,
  { type: "late" }
>["resolution"][];

/**
 * The (queue, family) pairs a rescheduled job is counted under (lib/runs/reschedule.ts): the
 * marketplace's endpoint families on queues whose kinds call it, `provider:<name>` for a limited provider.
 */
function rescheduleLabelSets(): { queue: string; family: string }[] {
  return [...RESCHEDULE_QUEUES].flatMap((queue) =>
    [
      ...new Set(
        kindsOfQueue(queue).flatMap((kind): string[] => {
          const provider = KINDS[kind].provider;
          if (provider === "marketplace") return FAMILIES;
          return (LIMITED_PROVIDERS as readonly string[]).includes(provider) ? [`provider:${provider}`] : [];
        }),
      ),
    ].map((family) => ({ queue, family })),
  );
}

/** The label values only the domains know (the configured providers among them), for the counters that start every known series at 0. */
export const domainLabelValues = (): DomainLabelValues => ({
  reschedules: rescheduleLabelSets(),
  providers: limitedProviders(),
  outsideServices: outsideServices(),
  breakerStates: BREAKER_STATES,
  reserveKinds: RESERVE_KINDS,
  lateResolutions: LATE_RESOLUTIONS,
  retentionClasses: RETENTION_CLASS_NAMES,
});

/**
 * The median job size a call allowance is computed from moves slowly (7 days of jobs), so one
 * computation serves every scrape for a minute instead of a median query per queue and kind on each.
 */
const CALL_ALLOWANCE_REFRESH_MS = 60_000;
let callAllowanceMemo: { at: number; value: Promise<CallAllowanceReading[]> } | undefined;

const callAllowancesFromJobs: ListCallAllowances = () => {
  if (callAllowanceMemo && Date.now() - callAllowanceMemo.at < CALL_ALLOWANCE_REFRESH_MS)
    return callAllowanceMemo.value;
  const value = (async () => {
    const allowances = await Promise.all(
      catalogPairs().map(async ({ queue, kind }) => ({ queue, kind, allowance: await getCallAllowance(kind, queue) })),
    );
    return allowances.flatMap(({ queue, kind, allowance }) =>
      allowance ? [{ queue, kind, seconds: allowance.allowanceMs / 1000 }] : [],
    );
  })();
  callAllowanceMemo = { at: Date.now(), value };
  // A failed computation is not remembered: the next scrape tries again.
  value.catch(() => {
    if (callAllowanceMemo?.value === value) callAllowanceMemo = undefined;
  });
  return value;
};

/** `bounded_jobs_stuck` from lib/reports/stuck, `bounded_jobs_awaiting_operator` from lib/reports/stuck-awaiting, `bounded_call_allowance_seconds` from lib/modelcalls/allowance, `bounded_queue_*` from lib/queues/overview, `bounded_outside_service_up` from the circuit breakers, `bounded_reserve_sweep_window_seconds` from lib/quota/settings, `bounded_retention_overdue_seconds` from lib/retention/status, `bounded_tenant_deletion_oldest_seconds` from lib/tenants/being-deleted. */
export const DATABASE_SOURCES: Required<ScrapeSources> = {
  countStuck: countStuckByKind,
  countAwaitingOperator: () => countAwaitingOperatorByKind(),
  callAllowances: callAllowancesFromJobs,
  queueGauges: () => readQueueGauges(),
  outsideServices: async () =>
    (await readBreakers())?.map((b) => ({ service: b.service, up: b.state === "closed" })) ?? [],
  sweepWindowSeconds: () => sweepPolicy().windowMs / 1000,
  retentionOverdue: () => retentionStatus(),
  tenantDeletionOldest: oldestDeletionSeconds,
};

/** Makes this process's metrics read the database at scrape time (the process that serves scrapes). */
export function installDatabaseSources(): void {
  installScrapeSources(DATABASE_SOURCES);
}

/**
 * Makes this process's metrics, and `m` if given, start the domain's label values at 0: every
 * process that publishes or serves its metrics calls it before the first snapshot or scrape.
 */
export function installDomainLabelValues(m?: BoundedMetrics): void {
  const values = domainLabelValues();
  installLabelValues(values);
  m?.seedLabels(values);
}
