import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { CallOutcome } from "@/lib/core/call-outcomes";
import { TERMINAL_STATUSES, type JobStatus } from "@/lib/core/job-statuses";
import { logger } from "@/lib/log";
import { JOB_KINDS, QUEUE_NAMES, type QueueName } from "@/lib/catalog/catalog";
import { SWEEP_POLICY, worstCaseMs } from "@/lib/catalog/generation-policy";
import { unscaled } from "@/lib/time";

/**
 * The process's Prometheus metrics: one prom-client `Registry` per process, kept on `globalThis`
 * (Next.js may load this module more than once; a second registration of the same name would
 * throw). Workers publish their registry to Redis (lib/reports/metrics-publish.ts) and the web's `GET /api/metrics`
 * merges it with its own, so one scrape sees web and workers together.
 *
 * The registry only: it imports nothing above the bottom layer (the catalog, the job statuses),
 * so every module that records a metric can import it. What only a domain knows — the label
 * values some counters start at 0, the scrape-time readings — is given from above
 * (lib/reports/metric-sources.ts, installed by lib/reports/metrics-publish.ts).
 */

/** Every metric name starts with this, Node's default metrics included. */
const METRIC_PREFIX = "bounded_";

/**
 * Buckets of `bounded_model_call_duration_seconds`: tool calls take tens of milliseconds, model
 * calls a median ~5.5 s with a p99 ~35 s and a rare tail to ~11 min; budgets end at tens of
 * minutes. Dense between 1 s and 1 min where the budgets are decided, up to an hour.
 */
const MODEL_CALL_DURATION_BUCKETS_S = [
  0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600, 900, 1800, 3600,
];

/**
 * Buckets of `bounded_rate_limit_wait_seconds` (production seconds): waits under the 5 s deferral
 * threshold are slept in the slot and never observed; the statistics family waits up to one
 * window (60 s), a caller that lost the race up to two (~125 s).
 */
const RATE_LIMIT_WAIT_BUCKETS_S = [5, 7.5, 10, 15, 20, 30, 45, 60, 75, 90, 105, 125, 150, 180, 300];

/**
 * Buckets of `bounded_provider_wait_seconds` (production seconds): a call waits tens of
 * milliseconds for the next token of a busy provider, seconds when every slot is taken by calls
 * of ~5.5 s median, and up to the 5 s deferral threshold inside a job or the 125 s cap outside.
 */
const PROVIDER_WAIT_BUCKETS_S = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 125];

/**
 * Buckets of `bounded_reserve_age_seconds` (production seconds): generations take a minute or
 * two, their worst case and the sweep window (both from lib/catalog/generation-policy.ts) are bucket bounds,
 * so "held past the worst case" and "reclaimed at the window" read straight off the histogram.
 */
const RESERVE_AGE_BUCKETS_S = [
  ...new Set([30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, worstCaseMs() / 1000, SWEEP_POLICY.windowMs / 1000]),
].sort((a, b) => a - b);

/**
 * Buckets of `bounded_http_request_duration_seconds` (production seconds): API reads answer in
 * milliseconds, an upload of a 95-file batch or a bulk retry in seconds, and a request that waits
 * for a rate limit outside a job gets at most a short wait before its 429.
 */
const HTTP_DURATION_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Node's default gauges that prom-client names `nodejs_active_{handles,requests,resources}_total`:
 * a `_total` suffix promises a counter, so `promtool check metrics` rejects them. They are the sums
 * of `bounded_nodejs_active_{handles,requests,resources}{type}`, which stay: `sum without (type)`
 * gives the same number.
 */
const DROPPED_DEFAULT_METRICS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

/**
 * A series at 0 for every label set of `initial` (the values the catalog or a domain knows), so
 * the first event is an increase from 0 that `rate()`/`increase()` see, not a new series starting
 * at 1 that they miss. Adding 0 to a series that exists changes nothing.
 */
function startAtZero<L extends string>(counter: Counter<L>, initial: readonly { [P in L]: string }[]): void {
  for (const labels of initial) counter.inc(labels as Partial<Record<L, string>>, 0);
}

/** Every combination of the given label values, e.g. `{ kind: [a, b], status: [x] }` → `[{a,x}, {b,x}]`. */
function labelSets<K extends string>(values: { [P in K]: readonly string[] }): { [P in K]: string }[] {
  return Object.entries<readonly string[]>(values).reduce<Record<string, string>[]>(
    (sets, [name, vals]) => sets.flatMap((set) => vals.map((v) => ({ ...set, [name]: v }))),
    [{}],
  ) as { [P in K]: string }[];
}

/** Counts of jobs stuck per kind, as `countStuckByKind()` in lib/reports/stuck returns them. */
export type CountStuckByKind = () => Promise<Record<string, number>>;

/** The call allowance of one queue and kind, in seconds (`getCallAllowance` in lib/modelcalls/allowance). */
export interface CallAllowanceReading {
  queue: string;
  kind: string;
  seconds: number;
}

/** Every known call allowance; a pair with no typical job yet is left out. */
export type ListCallAllowances = () => Promise<CallAllowanceReading[]>;

/**
 * One queue as the `bounded_queue_*` gauges report it, read once per scrape (`readQueueGauges` in
 * lib/queues/overview): counts, oldest waiting, budget, paused.
 */
export interface QueueGaugeReading {
  queue: QueueName;
  counts: Record<(typeof QUEUE_GAUGE_STATES)[number], number>;
  /** Production seconds. */
  oldestWaitingSeconds: number;
  softBudgetSeconds: number;
  paused: boolean;
}

/** The `type` label values of `bounded_model_tokens_total`. */
export const MODEL_TOKEN_TYPES = ["prompt", "completion"] as const;
/** Where a row's category came from (lib/answers): `bounded_category_answers_total{source}`. */
export const ANSWER_SOURCES = ["model", "job", "cache"] as const;

/** The lanes a job may take (lib/runs/batch-lane.ts): `bounded_batch_lane_decisions_total{lane}`. */
/** Why a model call went to the next provider of its route (`bounded_model_failovers_total{reason}`). */
export const FAILOVER_REASONS = ["down", "slow", "deadline"] as const;
export const BATCH_LANES = ["batch", "direct"] as const;
/**
 * How a job's batch ended for it (`bounded_batches_ended_total{outcome}`): completed, ended at the
 * provider (expired, failed, cancelled), given up on at the last moment, or unanswered then.
 */
export const BATCH_ENDINGS = ["completed", "expired", "failed", "cancelled", "last_moment", "unanswered"] as const;

/** The `state` label values of `bounded_queue_jobs`. */
export const QUEUE_GAUGE_STATES = ["waiting", "active", "delayed", "failed"] as const;

/**
 * The label values only their domains know, for the counters that give every known label set a
 * series at 0 (lib/reports/metric-sources.ts has them).
 */
export interface DomainLabelValues {
  /** The (queue, family) pairs of `bounded_rate_limit_reschedules_total` (lib/runs/reschedule.ts). */
  reschedules: readonly { queue: string; family: string }[];
  /** The limited providers of lib/ratelimit/buckets (`bounded_provider_waits_total`). */
  providers: readonly string[];
  /** The outside services and the states of their circuit breakers (`bounded_outside_service_state_changes_total`). */
  outsideServices: readonly string[];
  breakerStates: readonly string[];
  /** The reserve kinds and late-release resolutions of lib/quota/reserves (`bounded_reserve*_total`). */
  reserveKinds: readonly string[];
  lateResolutions: readonly string[];
  /** The classes of history lib/retention prunes (`bounded_retention_pruned_rows_total`). */
  retentionClasses: readonly string[];
}

/** What the scrape-time gauges read; lib/reports/metric-sources.ts has the database's. */
export interface ScrapeSources {
  /** Where the `bounded_queue_*` gauges come from, evaluated at scrape time (one read serves all four). */
  queueGauges?: () => Promise<QueueGaugeReading[]>;
  /** Where `bounded_jobs_stuck` comes from, evaluated at scrape time. */
  countStuck?: CountStuckByKind;
  /** Where `bounded_jobs_awaiting_operator` comes from (`countAwaitingOperatorByKind` in lib/reports/stuck-awaiting), evaluated at scrape time. */
  countAwaitingOperator?: CountStuckByKind;
  /** Where `bounded_call_allowance_seconds` comes from, evaluated at scrape time. */
  callAllowances?: ListCallAllowances;
  /** Where `bounded_outside_service_up` comes from (the circuit breakers in Redis), evaluated at scrape time. */
  outsideServices?: () => Promise<{ service: string; up: boolean }[]>;
  /** Where `bounded_reserve_sweep_window_seconds` comes from (the environment's setting), read at scrape time. */
  sweepWindowSeconds?: () => number;
  /** Where `bounded_retention_overdue_seconds` comes from (lib/retention/status.ts), evaluated at scrape time. */
  retentionOverdue?: () => Promise<{ name: string; overdueSeconds: number }[]>;
  /** Where `bounded_tenant_deletion_oldest_seconds` comes from (lib/tenants/being-deleted.ts), evaluated at scrape time. */
  tenantDeletionOldest?: () => Promise<number>;
}

export interface MetricsOptions extends ScrapeSources {
  /**
   * Whether to register Node's default metrics (`bounded_process_*`, `bounded_nodejs_*`).
   * @defaultValue true
   */
  defaultMetrics?: boolean;
  /**
   * The process's time scale: durations measured here are divided by it, so every duration metric
   * is in production seconds. @defaultValue `env().BOUNDED_TIME_SCALE`
   */
  timeScale?: number;
  /** The domain's label values to start at 0. @defaultValue the ones installed for the process (`installLabelValues`), else none */
  labelValues?: DomainLabelValues;
}

type Labels<K extends string> = { [P in K]: string };

/** What a recorded call needs to be observed (a `ModelCallRecord` fits). */
export interface ObservedCall {
  queue?: string | null;
  jobKind?: string | null;
  /** @defaultValue "model" (the column's default) */
  type?: "model" | "tool" | "ocr";
  outcome: CallOutcome;
  /** As measured in this process (real milliseconds); observed in production seconds. */
  durationMs: number;
  /** An `aborted` call cut by its job's deadline (`bounded_model_calls_cut_by_deadline_total`). */
  cutByDeadline?: boolean;
}

/** One API request as `bounded_http_*` count it. */
export interface ObservedRequest {
  method: string;
  /** The route's pattern (`/api/jobs/[id]`), never the path: ids would make a series each. */
  route: string;
  status: number;
  /** As measured in this process (real seconds); observed in production seconds. */
  seconds: number;
}

/** What one reused category answer saved: the row's share of the call that first answered it. */
export interface SavedModelSpend {
  promptTokens: number;
  completionTokens: number;
  /** null when the model has no price. */
  costUsd: number | null;
}

/** The typed helpers other modules call; every label is required so none is forgotten. */
export interface BoundedMetrics {
  registry: Registry;
  /** `bounded_model_call_duration_seconds{queue,kind,outcome,type}`: one observation per recorded call, in production seconds. */
  observeModelCall(call: ObservedCall): void;
  /**
   * An API request was answered: `bounded_http_requests_total{method,route,status}` +1 and its
   * duration (production seconds) in `bounded_http_request_duration_seconds{method,route,status}`.
   */
  observeRequest(request: ObservedRequest): void;
  /** `bounded_jobs_finished_total{kind,status}`: a job reached a terminal status. */
  jobsFinished: { inc(labels: { kind: string; status: JobStatus }, value?: number): void };
  /** `bounded_job_items_failed_total{kind}`: items recorded as failures (the batch went on). */
  jobItemsFailed: { inc(labels: Labels<"kind">, value?: number): void };
  /** `bounded_jobs_reaped_total{kind}`: jobs the reaper ended `failed` because their runs kept stopping (past MAX_CRASH_RESUMES resumes). */
  jobsReaped: { inc(labels: Labels<"kind">, value?: number): void };
  /** `bounded_jobs_crash_resumed_total{kind}`: a job whose run stopped without settling (its worker died) was resumed from its cursor. */
  jobsCrashResumed: { inc(labels: Labels<"kind">, value?: number): void };
  /** `bounded_jobs_auto_resumed_total{kind}`: a job that ended `failed` for an outside service was resumed by the platform. */
  jobsAutoResumed: { inc(labels: Labels<"kind">, value?: number): void };
  /** `bounded_model_tokens_total{kind,type}`: tokens of recorded model calls, as the endpoint counted them (type: prompt, completion). */
  modelTokens: { inc(labels: { kind: string; type: (typeof MODEL_TOKEN_TYPES)[number] }, value?: number): void };
  /**
   * A row got its category (lib/answers): `bounded_category_answers_total{kind,source}` +1
   * (source: model, job, cache). A reused answer (`saved` given) adds the row's share of the call
   * it was first asked in to `bounded_model_tokens_saved_total{kind,type}` and its estimated cost
   * to `bounded_model_cost_avoided_usd_total{kind}` (when the model has a price).
   */
  categoryAnswered(labels: Labels<"kind" | "source">, saved?: SavedModelSpend): void;
  /** `bounded_batch_lane_decisions_total{kind,lane}`: a job decided its lane at its start (batch, direct). */
  batchLaneDecided: { inc(labels: { kind: string; lane: (typeof BATCH_LANES)[number] }): void };
  /** `bounded_model_failovers_total{kind,from,to,reason}`: a model call went to the next provider of its route. */
  modelFailedOver: {
    inc(labels: { kind: string; from: string; to: string; reason: (typeof FAILOVER_REASONS)[number] }): void;
  };
  /** `bounded_batches_ended_total{kind,outcome}`: a job's batch ended for it (see `BATCH_ENDINGS`). */
  batchEnded: { inc(labels: { kind: string; outcome: (typeof BATCH_ENDINGS)[number] }): void };
  /**
   * `bounded_progress_polls_from_copy_total`: a progress poll was answered from the web process's
   * copy of the job's answer, before the framework's routing (lib/progress/front-door.ts).
   */
  progressPollsFromCopy: { inc(): void };
  /**
   * A job gave its worker slot back to wait for a rate-limit window:
   * `bounded_rate_limit_reschedules_total{queue,family}` +1 and the wait (production seconds) in
   * `bounded_rate_limit_wait_seconds{queue,family}`. Labels are the family, never the tenant.
   */
  rateLimitRescheduled(labels: Labels<"queue" | "family">, waitSeconds: number): void;
  /**
   * A provider call waited for its provider slot (a token or a free slot) before it went out, or
   * gave up waiting (deferred, or past the cap): `bounded_provider_waits_total{provider}` +1 and
   * the wait (production seconds) in `bounded_provider_wait_seconds{provider}`.
   */
  providerWaited(labels: Labels<"provider">, waitSeconds: number): void;
  /** `bounded_outside_service_state_changes_total{service,state}`: this process moved a service's circuit breaker into `state`. */
  outsideServiceStateChanged(labels: Labels<"service" | "state">): void;
  /**
   * A quota reserve ended: its age (production seconds) in `bounded_reserve_age_seconds{kind,end}`,
   * `end` = spent | refunded | reclaimed (by the sweeper).
   */
  observeReserveAge(labels: Labels<"kind" | "end">, ageSeconds: number): void;
  /** `bounded_reserves_reclaimed_total{kind}`: reserves the sweeper took back (refunded, effects undone). */
  reservesReclaimed: { inc(labels: Labels<"kind">, value?: number): void };
  /** `bounded_reserve_late_releases_total{kind,resolution}`: releases that found their reserve already swept. */
  reserveLateReleases: { inc(labels: Labels<"kind" | "resolution">, value?: number): void };
  /** `bounded_retention_pruned_rows_total{class}`: rows the retention pass deleted (lib/retention). */
  retentionPruned: { inc(labels: Labels<"class">, value?: number): void };
  /** Gives every label set of `values` a series at 0 (more than once changes nothing). */
  seedLabels(values: DomainLabelValues): void;
  /**
   * Turns off the scrape-time gauges in this process. A worker process calls it (through
   * `startMetricsPublisher`): what the database says is counted once, by the web, at scrape time,
   * not by every worker every few seconds.
   */
  disableScrapeTimeGauges(): void;
}

const log = logger("metrics");

const holder = globalThis as unknown as {
  __boundedMetrics?: BoundedMetrics;
  __boundedScrapeSources?: ScrapeSources;
  __boundedLabelValues?: DomainLabelValues;
};

/** The sources every metrics object of this process reads when none were given to it. */
export function installScrapeSources(sources: ScrapeSources): void {
  holder.__boundedScrapeSources = sources;
}

/**
 * The domain's label values every metrics object of this process starts at 0: the ones created
 * later at their creation, the process's own (if it exists already) now.
 */
export function installLabelValues(values: DomainLabelValues): void {
  holder.__boundedLabelValues = values;
  holder.__boundedMetrics?.seedLabels(values);
}

/** Registers Bounded's metrics on `registry` (a fresh one in tests, the process's one otherwise). */
export function createMetrics(registry: Registry, options: MetricsOptions = {}): BoundedMetrics {
  // A source given here wins; otherwise the one installed for the process (read at each scrape,
  // so installing after the metrics exist still works); with neither, the gauge stays empty.
  const countStuck = () => (options.countStuck ?? holder.__boundedScrapeSources?.countStuck)?.();
  const countAwaitingOperator = () =>
    (options.countAwaitingOperator ?? holder.__boundedScrapeSources?.countAwaitingOperator)?.();
  const callAllowances = () => (options.callAllowances ?? holder.__boundedScrapeSources?.callAllowances)?.();
  const outsideServices = () => (options.outsideServices ?? holder.__boundedScrapeSources?.outsideServices)?.();
  const sweepWindowSeconds = () =>
    (options.sweepWindowSeconds ?? holder.__boundedScrapeSources?.sweepWindowSeconds)?.();
  const retentionOverdue = () => (options.retentionOverdue ?? holder.__boundedScrapeSources?.retentionOverdue)?.();
  const tenantDeletionOldest = () =>
    (options.tenantDeletionOldest ?? holder.__boundedScrapeSources?.tenantDeletionOldest)?.();
  // The four queue gauges are collected side by side in one scrape: they share one read.
  let queueRead: { at: number; value: Promise<QueueGaugeReading[] | undefined> } | undefined;
  const queueGauges = () => {
    if (!queueRead || Date.now() - queueRead.at > 1_000)
      queueRead = {
        at: Date.now(),
        value: Promise.resolve((options.queueGauges ?? holder.__boundedScrapeSources?.queueGauges)?.()),
      };
    return queueRead.value;
  };
  let scrapeTimeGauges = true;

  // Every metric is registered on `registry` only, under the shared prefix.
  /** A counter with a series at 0 for every label set in `initial` (the values the catalog knows). */
  const counter = <L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    initial: readonly Labels<L>[] = [],
  ) => {
    const c = new Counter<L>({ name: `${METRIC_PREFIX}${name}`, help, labelNames, registers: [registry] });
    startAtZero(c, initial);
    return c;
  };
  const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[], buckets: number[]) =>
    new Histogram<L>({ name: `${METRIC_PREFIX}${name}`, help, labelNames, buckets, registers: [registry] });
  /**
   * A gauge read when scraped, unless this process turned scrape-time gauges off. Whoever reports
   * it reads the same database or settings, so merging processes must not add them up: `max`.
   * A read that fails is logged rather than failing the scrape: the other metrics still matter
   * when this one can't be read.
   */
  const scrapeTimeGauge = <L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    read: (gauge: Gauge<L>) => Promise<void> | void,
    failure: string,
  ) =>
    new Gauge<L>({
      name: `${METRIC_PREFIX}${name}`,
      help,
      labelNames,
      registers: [registry],
      aggregator: "max",
      async collect() {
        if (!scrapeTimeGauges) return;
        try {
          await read(this);
        } catch (err) {
          log.warn({ err }, failure);
        }
      },
    });

  const modelCallDuration = histogram(
    "model_call_duration_seconds",
    "Duration of model, OCR and tool calls, by queue, job kind, outcome and call type.",
    ["queue", "kind", "outcome", "type"],
    MODEL_CALL_DURATION_BUCKETS_S,
  );
  const callsCutByDeadline = counter(
    "model_calls_cut_by_deadline_total",
    "Model, OCR and tool calls cut by their job's soft limit before they answered, by queue, job kind and call type: the calls the duration histogram can only count as long as the budget let them run.",
    ["queue", "kind", "type"],
  );
  const jobsFinished = counter(
    "jobs_finished_total",
    "Jobs that reached a terminal status, by kind and status.",
    ["kind", "status"],
    labelSets({ kind: JOB_KINDS, status: TERMINAL_STATUSES }),
  );
  const jobItemsFailed = counter(
    "job_items_failed_total",
    "Batch items recorded as failed (the batch went on without them), by job kind.",
    ["kind"],
    labelSets({ kind: JOB_KINDS }),
  );
  const modelTokens = counter(
    "model_tokens_total",
    "Tokens of recorded model calls as the model endpoint counted them, by job kind and type (prompt, completion).",
    ["kind", "type"],
    labelSets({ kind: JOB_KINDS, type: MODEL_TOKEN_TYPES }),
  );
  const categoryAnswers = counter(
    "category_answers_total",
    "Rows given a category, by job kind and where the answer came from (model: the row's own call; job: an earlier row of the same job with the same question; cache: the tenant's stored answer).",
    ["kind", "source"],
    labelSets({ kind: JOB_KINDS, source: ANSWER_SOURCES }),
  );
  const modelTokensSaved = counter(
    "model_tokens_saved_total",
    "Model tokens not spent because a row's category answer was reused (within its job or from the tenant's stored answers): the row's share of the call that first answered it, by job kind and type (prompt, completion).",
    ["kind", "type"],
    labelSets({ kind: JOB_KINDS, type: MODEL_TOKEN_TYPES }),
  );
  const modelCostAvoided = counter(
    "model_cost_avoided_usd_total",
    "Estimated model cost (USD, from BOUNDED_MODEL_PRICES) not spent because category answers were reused, by job kind.",
    ["kind"],
    labelSets({ kind: JOB_KINDS }),
  );
  const batchLaneDecisions = counter(
    "batch_lane_decisions_total",
    "Jobs that decided their lane at their start (lib/runs/batch-lane.ts): batch (rows sent to the provider's Batch API) or direct, by kind.",
    ["kind", "lane"],
    labelSets({ kind: JOB_KINDS, lane: BATCH_LANES }),
  );
  const batchesEnded = counter(
    "batches_ended_total",
    "Jobs' batches at the provider's Batch API that ended for their job, by kind and outcome: completed, expired, failed or cancelled at the provider, given up on at the last moment (cancelled, the rest finished directly), or unanswered then.",
    ["kind", "outcome"],
    labelSets({ kind: JOB_KINDS, outcome: BATCH_ENDINGS }),
  );
  const modelFailovers = counter(
    "model_failovers_total",
    "Model calls that went to the next provider of their route, by job kind, the provider left, the one gone to, and why: down (its breaker open, half-open or misconfigured), slow (its median answer would come after the job's deadline), or deadline (still unanswered when the next one could only just answer in time; sent there too).",
    ["kind", "from", "to", "reason"],
  );
  const jobsReaped = counter(
    "jobs_reaped_total",
    "Jobs the reaper ended because their runs kept stopping without finishing (worker deaths past the bound of resumes), by kind; stopped runs below the bound are resumed, not counted.",
    ["kind"],
    labelSets({ kind: JOB_KINDS }),
  );
  const jobsCrashResumed = counter(
    "jobs_crash_resumed_total",
    "Jobs resumed from their cursor after their run stopped without finishing (the worker died or lost the job), by kind; a steady rise means workers keep dying.",
    ["kind"],
    labelSets({ kind: JOB_KINDS }),
  );
  const jobsAutoResumed = counter(
    "jobs_auto_resumed_total",
    "Jobs that ended failed because an outside service kept failing and were resumed by the platform (up to three times), by kind: their failed finish was not their outcome, and the objective's ratios take it out.",
    ["kind"],
    labelSets({ kind: JOB_KINDS }),
  );
  const rateLimitReschedules = counter(
    "rate_limit_reschedules_total",
    "Jobs that gave their worker slot back to wait for a rate-limit window (moved to delayed, no attempt spent), by queue and endpoint family.",
    ["queue", "family"],
  );
  const rateLimitWait = histogram(
    "rate_limit_wait_seconds",
    "How long a rescheduled job waits in delayed for its rate-limit window, in production seconds, by queue and endpoint family.",
    ["queue", "family"],
    RATE_LIMIT_WAIT_BUCKETS_S,
  );
  const providerWaits = counter(
    "provider_waits_total",
    "Provider calls (model, OCR) that waited for a provider slot — a token of the request rate or a free in-flight slot — before going out or giving up, by provider.",
    ["provider"],
  );
  const outsideServiceStateChanges = counter(
    "outside_service_state_changes_total",
    "Circuit breaker state changes of the outside services (open: calls stop going out, the service failed or fell silent; misconfigured: calls stop going out, the service refused our key, URL or model; half_open: one probe; closed: back), by service and the state entered.",
    ["service", "state"],
  );
  scrapeTimeGauge(
    "outside_service_up",
    "1 when the outside service's circuit breaker is closed (calls go out), 0 while it is open, misconfigured or half-open (jobs wait, nothing is failed for it), by service; read from Redis at scrape time.",
    ["service"],
    async (gauge) => {
      const read = await outsideServices();
      if (!read) return;
      for (const { service, up } of read) gauge.set({ service }, up ? 1 : 0);
    },
    "could not read the circuit breakers for bounded_outside_service_up",
  );
  const providerWait = histogram(
    "provider_wait_seconds",
    "How long a provider call waited for its provider slot, in production seconds, by provider (calls that did not wait are not observed).",
    ["provider"],
    PROVIDER_WAIT_BUCKETS_S,
  );
  const reserveAge = histogram(
    "reserve_age_seconds",
    "Age of quota reserves when they end (spent, refunded or reclaimed by the sweeper), in production seconds, by reserve kind.",
    ["kind", "end"],
    RESERVE_AGE_BUCKETS_S,
  );
  const reservesReclaimed = counter(
    "reserves_reclaimed_total",
    "Quota reserves the sweeper took back (past the sweep window and silent beyond the lease): unit refunded, kind-specific effects undone, by kind.",
    ["kind"],
  );
  const reserveLateReleases = counter(
    "reserve_late_releases_total",
    "Releases that found their reserve already swept, by kind and resolution (charged again, debt, none for a failure).",
    ["kind", "resolution"],
  );
  const retentionPruned = counter(
    "retention_pruned_rows_total",
    "Rows the retention pass deleted because they were older than their class keeps them (BOUNDED_RETAIN_*_DAYS), by class.",
    ["class"],
  );
  scrapeTimeGauge(
    "retention_overdue_seconds",
    "How long the oldest row a class would prune has been past its retention, in real seconds (0 when the pass keeps up), by class; read from the database at scrape time.",
    ["class"],
    async (gauge) => {
      gauge.reset();
      for (const { name, overdueSeconds } of (await retentionOverdue()) ?? [])
        gauge.set({ class: name }, overdueSeconds);
    },
    "could not read the retention's oldest rows for bounded_retention_overdue_seconds",
  );
  scrapeTimeGauge(
    "tenant_deletion_oldest_seconds",
    "How long the oldest tenant deletion still going on has been going on, in real seconds (0 when none is); read from the database at scrape time.",
    [],
    async (gauge) => {
      const seconds = await tenantDeletionOldest();
      if (seconds === undefined) gauge.reset();
      else gauge.set(seconds);
    },
    "could not read the tenant deletions for bounded_tenant_deletion_oldest_seconds",
  );
  const progressPollsFromCopy = counter(
    "progress_polls_from_copy_total",
    "Progress polls (GET /api/progress/<token>) the web answered from its copy of the job's answer, before the framework's routing: no Redis, no PostgreSQL. Also counted in bounded_http_requests_total.",
    [],
  );
  // Routes are only known once called: these series start at their first request.
  const httpRequests = counter(
    "http_requests_total",
    "API requests answered by the web process, by method, route pattern and HTTP status.",
    ["method", "route", "status"],
  );
  const httpRequestDuration = histogram(
    "http_request_duration_seconds",
    "Time from an API request reaching its route handler to its response, in production seconds (real ÷ BOUNDED_TIME_SCALE), by method, route pattern and HTTP status.",
    ["method", "route", "status"],
    HTTP_DURATION_BUCKETS_S,
  );
  scrapeTimeGauge(
    "jobs_stuck",
    "Jobs stuck now (not finished and silent, running past their soft budget, or queued longer than it; delayed jobs excluded), by kind; read from the database at scrape time.",
    ["kind"],
    async (gauge) => {
      gauge.reset();
      const counts = await countStuck();
      if (!counts) return;
      // Every kind of the catalog has a series (0 when nothing is stuck), so a graph or an
      // alert never has to tell "none stuck" from "not reported".
      for (const kind of JOB_KINDS) gauge.set({ kind }, 0);
      for (const [kind, n] of Object.entries(counts)) gauge.set({ kind }, n);
    },
    "could not count stuck jobs for bounded_jobs_stuck",
  );
  scrapeTimeGauge(
    "jobs_awaiting_operator",
    "Jobs that ended for a cause of their own and wait on a person nobody has acted on yet (no retry, split or mark handled since they ended), by kind; the first group of /stuck; read from the database at scrape time.",
    ["kind"],
    async (gauge) => {
      gauge.reset();
      const counts = await countAwaitingOperator();
      if (!counts) return;
      // Every kind has a series (0 when none waits), as for bounded_jobs_stuck: the alert's `> 0`
      // never has to tell "none" from "not reported".
      for (const kind of JOB_KINDS) gauge.set({ kind }, 0);
      for (const [kind, n] of Object.entries(counts)) gauge.set({ kind }, n);
    },
    "could not count jobs awaiting an operator for bounded_jobs_awaiting_operator",
  );
  scrapeTimeGauge(
    "call_allowance_seconds",
    "Call allowance: what one model call may take on average for a typical job of the kind (its median size over the last 7 days) to finish inside the queue's soft budget, given the items one call carries and the calls that go at once (the reference line of /model-calls), by queue and kind; read from the database at scrape time.",
    ["queue", "kind"],
    async (gauge) => {
      gauge.reset();
      for (const { queue, kind, seconds } of (await callAllowances()) ?? [])
        if (Number.isFinite(seconds)) gauge.set({ queue, kind }, seconds);
    },
    "could not compute call allowances for bounded_call_allowance_seconds",
  );
  scrapeTimeGauge(
    "reserve_sweep_window_seconds",
    "The reserve sweeper's window in production seconds (a reserve younger than this is never reclaimed): BOUNDED_RESERVE_SWEEP_WINDOW_S or the default; read at scrape time.",
    [],
    (gauge) => {
      const seconds = sweepWindowSeconds();
      if (seconds !== undefined) gauge.set(seconds);
    },
    "could not read the sweep window for bounded_reserve_sweep_window_seconds",
  );
  /** Every queue of the catalog has a series (0 when none), so "empty" never reads as "not reported". */
  const queueGauge = <L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    set: (gauge: Gauge<L>, q: QueueGaugeReading) => void,
  ) =>
    scrapeTimeGauge(
      name,
      help,
      labelNames,
      async (gauge) => {
        gauge.reset();
        const read = await queueGauges();
        if (!read) return;
        const byQueue = new Map(read.map((q) => [q.queue, q]));
        for (const queue of QUEUE_NAMES)
          set(
            gauge,
            byQueue.get(queue) ?? {
              queue,
              counts: { waiting: 0, active: 0, delayed: 0, failed: 0 },
              oldestWaitingSeconds: 0,
              softBudgetSeconds: 0,
              paused: false,
            },
          );
      },
      `could not read the queues for bounded_${name}`,
    );
  queueGauge(
    "queue_jobs",
    "Queue jobs by queue and BullMQ state (waiting includes prioritized; failed is the queue's failed set, kept 7 days); read at scrape time.",
    ["queue", "state"],
    (gauge, q) => {
      for (const state of QUEUE_GAUGE_STATES) gauge.set({ queue: q.queue, state }, q.counts[state]);
    },
  );
  queueGauge(
    "queue_oldest_waiting_seconds",
    "How long the oldest job queued for a worker has waited since it last entered the queue, in production seconds (0 when none waits), by queue; read from the database at scrape time.",
    ["queue"],
    (gauge, q) => gauge.set({ queue: q.queue }, q.oldestWaitingSeconds),
  );
  queueGauge(
    "queue_soft_budget_seconds",
    "The smallest soft budget of the queue's job kinds (environment overrides included), in production seconds, by queue: what the oldest waiting job is compared with.",
    ["queue"],
    (gauge, q) => {
      if (q.softBudgetSeconds > 0) gauge.set({ queue: q.queue }, q.softBudgetSeconds);
    },
  );
  queueGauge(
    "queue_paused",
    "1 when an operator paused the queue (no new job starts), else 0, by queue; read at scrape time.",
    ["queue"],
    (gauge, q) => gauge.set({ queue: q.queue }, q.paused ? 1 : 0),
  );
  const seedLabels = (values: DomainLabelValues) => {
    startAtZero(rateLimitReschedules, values.reschedules);
    startAtZero(providerWaits, labelSets({ provider: values.providers }));
    startAtZero(
      outsideServiceStateChanges,
      labelSets({ service: values.outsideServices, state: values.breakerStates }),
    );
    startAtZero(reservesReclaimed, labelSets({ kind: values.reserveKinds }));
    startAtZero(reserveLateReleases, labelSets({ kind: values.reserveKinds, resolution: values.lateResolutions }));
    startAtZero(retentionPruned, labelSets({ class: values.retentionClasses }));
  };
  const labelValues = options.labelValues ?? holder.__boundedLabelValues;
  if (labelValues) seedLabels(labelValues);
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
    for (const name of DROPPED_DEFAULT_METRICS) registry.removeSingleMetric(`${METRIC_PREFIX}${name}`);
  }

  return {
    registry,
    observeModelCall(call) {
      // Called on the model client's path: a bad sample is dropped, never thrown at the caller.
      if (!Number.isFinite(call.durationMs)) return;
      const labels = { queue: call.queue ?? "", kind: call.jobKind ?? "", type: call.type ?? "model" };
      modelCallDuration.observe(
        { ...labels, outcome: call.outcome },
        unscaled(call.durationMs, options.timeScale) / 1000,
      );
      // Every call adds to its series, 0 when not cut: the series exists before its first cut, so increase() sees it.
      callsCutByDeadline.inc(labels, call.outcome === "aborted" && call.cutByDeadline ? 1 : 0);
    },
    observeRequest({ method, route, status, seconds }) {
      const labels = { method, route, status: String(status) };
      httpRequests.inc(labels);
      if (Number.isFinite(seconds)) httpRequestDuration.observe(labels, unscaled(seconds, options.timeScale));
    },
    jobsFinished: { inc: (labels, value) => jobsFinished.inc(labels, value) },
    jobItemsFailed: { inc: (labels, value) => jobItemsFailed.inc(labels, value) },
    jobsReaped: { inc: (labels, value) => jobsReaped.inc(labels, value) },
    jobsCrashResumed: { inc: (labels, value) => jobsCrashResumed.inc(labels, value) },
    jobsAutoResumed: { inc: (labels, value) => jobsAutoResumed.inc(labels, value) },
    modelTokens: { inc: (labels, value) => modelTokens.inc(labels, value) },
    batchLaneDecided: { inc: (labels) => batchLaneDecisions.inc(labels) },
    modelFailedOver: { inc: (labels) => modelFailovers.inc(labels) },
    batchEnded: { inc: (labels) => batchesEnded.inc(labels) },
    progressPollsFromCopy: { inc: () => progressPollsFromCopy.inc() },
    categoryAnswered(labels, saved) {
      categoryAnswers.inc(labels);
      if (!saved) return;
      const kind = { kind: labels.kind };
      if (saved.promptTokens > 0) modelTokensSaved.inc({ ...kind, type: "prompt" }, saved.promptTokens);
      if (saved.completionTokens > 0) modelTokensSaved.inc({ ...kind, type: "completion" }, saved.completionTokens);
      if (saved.costUsd !== null && saved.costUsd > 0) modelCostAvoided.inc(kind, saved.costUsd);
    },
    rateLimitRescheduled(labels, waitSeconds) {
      rateLimitReschedules.inc(labels);
      if (Number.isFinite(waitSeconds)) rateLimitWait.observe(labels, Math.max(0, waitSeconds));
    },
    outsideServiceStateChanged(labels) {
      outsideServiceStateChanges.inc(labels);
    },
    providerWaited(labels, waitSeconds) {
      providerWaits.inc(labels);
      if (Number.isFinite(waitSeconds)) providerWait.observe(labels, Math.max(0, waitSeconds));
    },
    observeReserveAge(labels, ageSeconds) {
      if (Number.isFinite(ageSeconds)) reserveAge.observe(labels, Math.max(0, ageSeconds));
    },
    reservesReclaimed: { inc: (labels, value) => reservesReclaimed.inc(labels, value) },
    retentionPruned: { inc: (labels, value) => retentionPruned.inc(labels, value) },
    reserveLateReleases: { inc: (labels, value) => reserveLateReleases.inc(labels, value) },
    seedLabels,
    disableScrapeTimeGauges() {
      scrapeTimeGauges = false;
    },
  };
}

/** This process's metrics (created on first use, on a registry of their own). */
export function processMetrics(): BoundedMetrics {
  holder.__boundedMetrics ??= createMetrics(new Registry());
  return holder.__boundedMetrics;
}

/**
 * The typed helpers, e.g. `metrics.jobsFinished.inc({ kind, status })`. A thin proxy over
 * `processMetrics()`, so importing it creates nothing until a metric is used.
 */
export const metrics = {
  observeModelCall: (call: ObservedCall) => processMetrics().observeModelCall(call),
  observeRequest: (request: ObservedRequest) => processMetrics().observeRequest(request),
  jobsFinished: {
    inc: (labels: { kind: string; status: JobStatus }, value?: number) =>
      processMetrics().jobsFinished.inc(labels, value),
  },
  jobItemsFailed: {
    inc: (labels: Labels<"kind">, value?: number) => processMetrics().jobItemsFailed.inc(labels, value),
  },
  jobsReaped: { inc: (labels: Labels<"kind">, value?: number) => processMetrics().jobsReaped.inc(labels, value) },
  jobsCrashResumed: {
    inc: (labels: Labels<"kind">, value?: number) => processMetrics().jobsCrashResumed.inc(labels, value),
  },
  jobsAutoResumed: {
    inc: (labels: Labels<"kind">, value?: number) => processMetrics().jobsAutoResumed.inc(labels, value),
  },
  modelTokens: {
    inc: (labels: { kind: string; type: (typeof MODEL_TOKEN_TYPES)[number] }, value?: number) =>
      processMetrics().modelTokens.inc(labels, value),
  },
  categoryAnswered: (labels: Labels<"kind" | "source">, saved?: SavedModelSpend) =>
    processMetrics().categoryAnswered(labels, saved),
  batchLaneDecided: {
    inc: (labels: { kind: string; lane: (typeof BATCH_LANES)[number] }) =>
      processMetrics().batchLaneDecided.inc(labels),
  },
  modelFailedOver: {
    inc: (labels: { kind: string; from: string; to: string; reason: (typeof FAILOVER_REASONS)[number] }) =>
      processMetrics().modelFailedOver.inc(labels),
  },
  batchEnded: {
    inc: (labels: { kind: string; outcome: (typeof BATCH_ENDINGS)[number] }) => processMetrics().batchEnded.inc(labels),
  },
  progressPollsFromCopy: { inc: () => processMetrics().progressPollsFromCopy.inc() },

  observeReserveAge: (labels: Labels<"kind" | "end">, ageSeconds: number) =>
    processMetrics().observeReserveAge(labels, ageSeconds),
  reservesReclaimed: {
    inc: (labels: Labels<"kind">, value?: number) => processMetrics().reservesReclaimed.inc(labels, value),
  },
  reserveLateReleases: {
    inc: (labels: Labels<"kind" | "resolution">, value?: number) =>
      processMetrics().reserveLateReleases.inc(labels, value),
  },
  retentionPruned: {
    inc: (labels: Labels<"class">, value?: number) => processMetrics().retentionPruned.inc(labels, value),
  },
  rateLimitRescheduled: (labels: Labels<"queue" | "family">, waitSeconds: number) =>
    processMetrics().rateLimitRescheduled(labels, waitSeconds),
  providerWaited: (labels: Labels<"provider">, waitSeconds: number) =>
    processMetrics().providerWaited(labels, waitSeconds),
  outsideServiceStateChanged: (labels: Labels<"service" | "state">) =>
    processMetrics().outsideServiceStateChanged(labels),
} as const;
