import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { JobStatus } from "@/lib/jobs/statuses";
import { logger } from "@/lib/log";
import { JOB_KINDS } from "@/lib/queues/catalog";

/**
 * The process's Prometheus metrics: one prom-client `Registry` per process, kept on `globalThis`
 * (Next.js may load this module more than once; a second registration of the same name would
 * throw). Workers publish their registry to Redis (./publish.ts) and the web's `GET /api/metrics`
 * merges it with its own, so one scrape sees web and workers together.
 */

/** Every metric name starts with this, Node's default metrics included. */
export const METRIC_PREFIX = "bounded_";

/**
 * Buckets of `bounded_model_call_duration_seconds`: tool calls take tens of milliseconds, model
 * calls a median ~5.5 s with a p99 ~35 s and a rare tail to ~11 min; budgets end at tens of
 * minutes. Dense between 1 s and 1 min where the budgets are decided, up to an hour.
 */
export const MODEL_CALL_DURATION_BUCKETS_S = [
  0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600, 900, 1800, 3600,
];

/** Counts of jobs stuck per kind, as `countStuckByKind()` in lib/jobs/stuck returns them. */
export type CountStuckByKind = () => Promise<Record<string, number>>;

export interface MetricsOptions {
  /**
   * Where `bounded_jobs_stuck` comes from, evaluated at scrape time.
   * @defaultValue `countStuckByKind` from `@/lib/jobs/stuck` (loaded on first scrape)
   */
  countStuck?: CountStuckByKind;
  /**
   * Whether to register Node's default metrics (`bounded_process_*`, `bounded_nodejs_*`).
   * @defaultValue true
   */
  defaultMetrics?: boolean;
}

type Labels<K extends string> = { [P in K]: string };

/** What a recorded call needs to be observed (a `ModelCallRecord` fits). */
export interface ObservedCall {
  queue?: string | null;
  jobKind?: string | null;
  /** @defaultValue "model" (the column's default) */
  type?: "model" | "tool" | "ocr";
  outcome: "ok" | "error" | "aborted";
  durationMs: number;
}

/** The typed helpers other modules call; every label is required so none is forgotten. */
export interface BoundedMetrics {
  registry: Registry;
  /** `bounded_model_call_duration_seconds{queue,kind,outcome,type}`: one observation per recorded call. */
  observeModelCall(call: ObservedCall): void;
  /** `bounded_jobs_finished_total{kind,status}`: a job reached a terminal status. */
  jobsFinished: { inc(labels: { kind: string; status: JobStatus }, value?: number): void };
  /** `bounded_job_items_failed_total{kind}`: items recorded as failures (the batch went on). */
  jobItemsFailed: { inc(labels: Labels<"kind">, value?: number): void };
  /** `bounded_jobs_reaped_total{kind}`: jobs the reaper finalized after their hard limit and heartbeat. */
  jobsReaped: { inc(labels: Labels<"kind">, value?: number): void };
  /**
   * Turns off the scrape-time gauges in this process. A worker process calls it (through
   * `startMetricsPublisher`): what the database says is counted once, by the web, at scrape time,
   * not by every worker every few seconds.
   */
  disableScrapeTimeGauges(): void;
}

const log = logger("metrics");

/** The default source of `bounded_jobs_stuck`: another module, loaded only when a scrape needs it. */
const countStuckFromJobs: CountStuckByKind = async () => (await import("@/lib/jobs/stuck")).countStuckByKind();

/** Registers Bounded's metrics on `registry` (a fresh one in tests, the process's one otherwise). */
export function createMetrics(registry: Registry, options: MetricsOptions = {}): BoundedMetrics {
  const countStuck = options.countStuck ?? countStuckFromJobs;
  let scrapeTimeGauges = true;

  const modelCallDuration = new Histogram({
    name: `${METRIC_PREFIX}model_call_duration_seconds`,
    help: "Duration of model, OCR and tool calls, by queue, job kind, outcome and call type.",
    labelNames: ["queue", "kind", "outcome", "type"] as const,
    buckets: MODEL_CALL_DURATION_BUCKETS_S,
    registers: [registry],
  });
  const jobsFinished = new Counter({
    name: `${METRIC_PREFIX}jobs_finished_total`,
    help: "Jobs that reached a terminal status, by kind and status.",
    labelNames: ["kind", "status"] as const,
    registers: [registry],
  });
  const jobItemsFailed = new Counter({
    name: `${METRIC_PREFIX}job_items_failed_total`,
    help: "Batch items recorded as failed (the batch went on without them), by job kind.",
    labelNames: ["kind"] as const,
    registers: [registry],
  });
  const jobsReaped = new Counter({
    name: `${METRIC_PREFIX}jobs_reaped_total`,
    help: "Jobs the reaper abandoned: silent past their hard limit, or no longer held by the queue, by kind.",
    labelNames: ["kind"] as const,
    registers: [registry],
  });
  new Gauge({
    name: `${METRIC_PREFIX}jobs_stuck`,
    help: "Jobs stuck now (not finished and silent, running past their soft budget, or queued longer than it; delayed jobs excluded), by kind; read from the database at scrape time.",
    labelNames: ["kind"] as const,
    registers: [registry],
    // Every process that reports it reads the same database: merging must not add them up.
    aggregator: "max",
    async collect() {
      if (!scrapeTimeGauges) return;
      this.reset();
      try {
        const counts = await countStuck();
        // Every kind of the catalog has a series (0 when nothing is stuck), so a graph or an
        // alert never has to tell "none stuck" from "not reported".
        for (const kind of JOB_KINDS) this.set({ kind }, 0);
        for (const [kind, n] of Object.entries(counts)) this.set({ kind }, n);
      } catch (err) {
        // No value rather than a failed scrape: the other metrics still matter when this one can't be read.
        log.warn({ err }, "could not count stuck jobs for bounded_jobs_stuck");
      }
    },
  });
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });

  return {
    registry,
    observeModelCall(call) {
      // Called on the model client's path: a bad sample is dropped, never thrown at the caller.
      if (!Number.isFinite(call.durationMs)) return;
      modelCallDuration.observe(
        { queue: call.queue ?? "", kind: call.jobKind ?? "", outcome: call.outcome, type: call.type ?? "model" },
        Math.max(0, call.durationMs) / 1000,
      );
    },
    jobsFinished: { inc: (labels, value) => jobsFinished.inc(labels, value) },
    jobItemsFailed: { inc: (labels, value) => jobItemsFailed.inc(labels, value) },
    jobsReaped: { inc: (labels, value) => jobsReaped.inc(labels, value) },
    disableScrapeTimeGauges() {
      scrapeTimeGauges = false;
    },
  };
}

const holder = globalThis as unknown as { __boundedMetrics?: BoundedMetrics };

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
  jobsFinished: { inc: (labels: { kind: string; status: JobStatus }, value?: number) => processMetrics().jobsFinished.inc(labels, value) },
  jobItemsFailed: { inc: (labels: Labels<"kind">, value?: number) => processMetrics().jobItemsFailed.inc(labels, value) },
  jobsReaped: { inc: (labels: Labels<"kind">, value?: number) => processMetrics().jobsReaped.inc(labels, value) },
} as const;
