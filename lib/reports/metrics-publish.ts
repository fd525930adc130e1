import { hostname } from "node:os";
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from "prom-client";
import { logger } from "@/lib/log";
import { createRedis, key, redis, scanKeys, type RedisClient } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import { processMetrics, type BoundedMetrics } from "@/lib/metrics/metrics";
import { installDatabaseSources, installDomainLabelValues } from "./metric-sources";

/**
 * Web and workers in one scrape. Prometheus scrapes the web (`GET /api/metrics`); workers have
 * no HTTP port, so each worker process writes its whole registry as JSON to Redis every few
 * seconds under `metrics:<host>:<pid>` with a TTL, and the web merges every live snapshot with its
 * own registry using prom-client's `AggregatorRegistry.aggregate` (the same merge prom-client
 * uses for Node cluster workers).
 *
 * Every series carries a `process` label naming where it was counted: `web` for the process that
 * answers the scrape, `<role>-<host>-<pid>` (`workers-box-4242`) for a worker's snapshot. Nothing
 * is added up here, so:
 * - a worker that restarts is a new series (a new pid) starting at 0, and its old one ends when
 *   the snapshot's TTL runs out: Prometheus never sees a counter reset of a fleet sum, and
 *   `sum without (process) (rate(x[5m]))` is the rate of the fleet;
 * - gauges are per process (memory, event-loop lag, start time): a query says how to combine them
 *   (`sum` for memory of the fleet, `max` for the worst lag), never a blind sum made here;
 * - the scrape-time gauges (`bounded_jobs_stuck`, `bounded_queue_*`…) are read from the database
 *   by the web only, so they have one series, `process="web"`.
 * ops/README.md says why this and not one scrape target per process.
 */

const log = logger("metrics");

/** How often a worker publishes (production time; scaled, never under a second). */
const PUBLISH_EVERY_MS = 5_000;
const MIN_PUBLISH_EVERY_MS = 1_000;
/** A snapshot outlives three missed publications, then it is gone with its process. */
const TTL_PUBLICATIONS = 3;

type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** What a worker writes to Redis. */
export interface MetricsSnapshot {
  role: string;
  host: string;
  pid: number;
  at: string;
  metrics: MetricsJson;
}

/** The Redis key of this process's snapshot: `<prefix>:metrics:<host>:<pid>`. */
export function snapshotKey(host: string = hostname(), pid: number = process.pid): string {
  return key("metrics", `${host}:${pid}`);
}

export interface MetricsPublisherOptions {
  /** @defaultValue `max(1 s, scaled(5 s))` */
  intervalMs?: number;
  /** @defaultValue this process's metrics */
  metrics?: BoundedMetrics;
  /** @defaultValue a connection of its own, closed by the returned stop function */
  connection?: RedisClient;
}

/**
 * Publishes this process's registry to Redis now and then every interval, until the returned
 * function is called; that function stops the timer, removes the snapshot (the process's numbers
 * leave the merged view at once instead of when the TTL runs out) and closes its connection.
 * Call it once per worker process: `const stopMetrics = startMetricsPublisher("workers")`.
 */
export function startMetricsPublisher(role: string, options: MetricsPublisherOptions = {}): () => Promise<void> {
  const m = options.metrics ?? processMetrics();
  installDomainLabelValues(m);
  m.disableScrapeTimeGauges();
  const intervalMs = options.intervalMs ?? Math.max(MIN_PUBLISH_EVERY_MS, scaled(PUBLISH_EVERY_MS));
  const connection = options.connection ?? createRedis("producer", { enableOfflineQueue: true });
  const snapshot = snapshotKey();
  const host = hostname();

  let inFlight: Promise<void> = Promise.resolve();
  let failing = false;
  const publish = () => {
    inFlight = (async () => {
      try {
        const body: MetricsSnapshot = {
          role,
          host,
          pid: process.pid,
          at: new Date().toISOString(),
          metrics: await m.registry.getMetricsAsJSON(),
        };
        await connection.set(snapshot, JSON.stringify(body), "PX", intervalMs * TTL_PUBLICATIONS);
        if (failing) log.info("metrics snapshots are published again");
        failing = false;
      } catch (err) {
        // Say it once per outage, not every interval.
        if (!failing)
          log.warn({ err: err instanceof Error ? err.message : String(err) }, "could not publish the metrics snapshot");
        failing = true;
      }
    })();
  };
  publish();
  const timer = setInterval(publish, intervalMs);
  timer.unref();

  let stopped: Promise<void> | undefined;
  return () => {
    stopped ??= (async () => {
      clearInterval(timer);
      await inFlight;
      await connection.del(snapshot).catch(() => undefined);
      if (!options.connection) await connection.quit().catch(() => connection.disconnect());
    })();
    return stopped;
  };
}

/** Every live worker snapshot in Redis (expired ones are gone by TTL; unreadable ones are skipped). */
export async function readWorkerSnapshots(connection: RedisClient = redis()): Promise<MetricsSnapshot[]> {
  const keys: string[] = [];
  for await (const batch of scanKeys(connection, key("metrics", "*"), 500)) keys.push(...batch);
  if (keys.length === 0) return [];
  // One MGET for all snapshots: on a Redis Cluster they share the prefix's slot.
  const values = await connection.mget(...keys);
  const snapshots: MetricsSnapshot[] = [];
  for (const [i, value] of values.entries()) {
    if (value === null) continue; // expired between SCAN and MGET
    try {
      const parsed = JSON.parse(value) as MetricsSnapshot;
      if (Array.isArray(parsed.metrics)) snapshots.push(parsed);
    } catch {
      log.warn({ key: keys[i] }, "skipping an unreadable metrics snapshot");
    }
  }
  return snapshots;
}

/**
 * Whose series a scrape returns: this web process's and every live worker's (`all`, one target
 * for everything), or only one side — with several web instances, each is scraped for `web` and
 * one of them (through the load balancer) for `workers`, so worker series are not stored once per
 * web instance. ops/README.md has the scrape configuration.
 */
export const METRICS_SOURCES = ["all", "web", "workers"] as const;
export type MetricsSource = (typeof METRICS_SOURCES)[number];

/**
 * The Prometheus text of the web process and every live worker, merged. When Redis cannot be
 * read, the web's own metrics are still returned (and the failure logged): a scrape that fails
 * entirely would hide the one thing that still works.
 */
export async function renderMetrics(
  options: { metrics?: BoundedMetrics; connection?: RedisClient; sources?: MetricsSource } = {},
): Promise<{ contentType: string; text: string }> {
  const sources = options.sources ?? "all";
  // The process that serves scrapes reads the database's gauges at scrape time.
  installDatabaseSources();
  const m = options.metrics ?? processMetrics();
  installDomainLabelValues(m);
  const [own, workers] = await Promise.all([
    sources === "workers" ? [] : m.registry.getMetricsAsJSON(),
    sources === "web"
      ? []
      : readWorkerSnapshots(options.connection).catch((err: unknown) => {
          log.warn(
            { err: err instanceof Error ? err.message : String(err) },
            "could not read worker metrics snapshots; serving the web's own",
          );
          return [] as MetricsSnapshot[];
        }),
  ]);
  const merged = AggregatorRegistry.aggregate([
    withProcess(own, WEB_PROCESS),
    ...workers.map((w) => withProcess(w.metrics, processLabel(w))),
  ]);
  return { contentType: merged.contentType, text: await merged.metrics() };
}

/** The `process` label of the process that answers scrapes. */
const WEB_PROCESS = "web";

/** The `process` label of a worker's series: `<role>-<host>-<pid>`, unique while the process lives. */
function processLabel(snapshot: Pick<MetricsSnapshot, "role" | "host" | "pid">): string {
  return `${snapshot.role}-${snapshot.host}-${snapshot.pid}`;
}

/**
 * One source's metrics with `process` on every series. With it no two sources share a series, so
 * the merge only puts them side by side; `first` keeps a metric prom-client would otherwise drop
 * when merging (`omit`: the process start time, meaningful once it is per process).
 */
function withProcess(metrics: MetricsJson, process: string): MetricsJson {
  return metrics.map((metric) => ({
    ...metric,
    aggregator: "first",
    values: metric.values.map((v) => ({ ...v, labels: { ...v.labels, process } })),
  }));
}
