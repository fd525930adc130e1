import { hostname } from "node:os";
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from "prom-client";
import { logger } from "@/lib/log";
import { createRedis, key, redis, scanKeys, type RedisClient } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import { processMetrics, type BoundedMetrics } from "./metrics";
import { useDatabaseSources } from "./sources";

/**
 * Web and workers in one scrape. Prometheus scrapes the web (`GET /api/metrics`); workers have
 * no HTTP port, so each worker process writes its whole registry as JSON to Redis every few
 * seconds under `metrics:<host>:<pid>` with a TTL, and the web merges every live snapshot with its
 * own registry using prom-client's `AggregatorRegistry.aggregate` (the same merge prom-client
 * uses for Node cluster workers).
 *
 * How the merge aggregates, per metric (its `aggregator`):
 * - counters and histograms: **sum** — what Prometheus wants; `rate()` over the sum is the rate of
 *   the fleet. A worker that restarts starts again from 0 and its old snapshot expires, which
 *   Prometheus reads as a counter reset (a short undercount, never a spike).
 * - gauges: prom-client's declared aggregator — **sum** unless said otherwise, so memory, heap,
 *   handles and active requests are fleet totals; event-loop lag is the **average** (its min and
 *   max gauges use min and max); process start time is **omitted** and the Node version is the
 *   **first** one seen. `bounded_jobs_stuck` is computed from the database, by the web only, at
 *   scrape time, and declared **max**, so it can never be counted once per process.
 * - no `process` label is added: sources are anonymous, and a dead worker's series disappear
 *   with its snapshot's TTL.
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
        const body: MetricsSnapshot = { role, host, pid: process.pid, at: new Date().toISOString(), metrics: await m.registry.getMetricsAsJSON() };
        await connection.set(snapshot, JSON.stringify(body), "PX", intervalMs * TTL_PUBLICATIONS);
        if (failing) log.info("metrics snapshots are published again");
        failing = false;
      } catch (err) {
        // Say it once per outage, not every interval.
        if (!failing) log.warn({ err: err instanceof Error ? err.message : String(err) }, "could not publish the metrics snapshot");
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
 * The Prometheus text of the web process and every live worker, merged. When Redis cannot be
 * read, the web's own metrics are still returned (and the failure logged): a scrape that fails
 * entirely would hide the one thing that still works.
 */
export async function renderMetrics(options: { metrics?: BoundedMetrics; connection?: RedisClient } = {}): Promise<{ contentType: string; text: string }> {
  // The process that serves scrapes reads the database's gauges at scrape time.
  useDatabaseSources();
  const m = options.metrics ?? processMetrics();
  const [own, workers] = await Promise.all([
    m.registry.getMetricsAsJSON(),
    readWorkerSnapshots(options.connection).catch((err: unknown) => {
      log.warn({ err: err instanceof Error ? err.message : String(err) }, "could not read worker metrics snapshots; serving the web's own");
      return [] as MetricsSnapshot[];
    }),
  ]);
  const merged = AggregatorRegistry.aggregate([own, ...workers.map((w) => w.metrics)]);
  return { contentType: merged.contentType, text: await merged.metrics() };
}
