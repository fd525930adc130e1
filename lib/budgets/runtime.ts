import { hostname } from "node:os";
import { env, type Env } from "@/lib/env";
import { logger } from "@/lib/log";
import { key, redis as sharedRedis, scanKeys, type RedisClient } from "@/lib/redis/client";
import { scaled } from "@/lib/time";
import { pairsOfQueues, resolveBudgetUnchecked } from "./budgets";
import { workerBudgetsSchema, type WorkerBudgets } from "./schemas";

const log = logger("budgets");

/**
 * Production interval between two publications: short enough that the page shows a restarted
 * worker's new budgets within seconds, long enough that a hundred workers cost nothing.
 */
const PUBLISH_INTERVAL_MS = 10_000;
/** Never publish more often than once a second, however small BOUNDED_TIME_SCALE is. */
const MIN_PUBLISH_INTERVAL_MS = 1_000;
/** A publication lives 3 intervals: one or two missed publishes (a GC pause, a Redis blip) do not make a live worker vanish. */
const TTL_INTERVALS = 3;

/** The Redis key prefix of all publications: `<BOUNDED_REDIS_PREFIX>:worker-budgets`. */
function defaultNamespace(): string {
  return key("worker-budgets");
}

/** This process's interval between publications, in wall-clock ms. */
function publishIntervalMs(timeScale: number = env().BOUNDED_TIME_SCALE): number {
  return Math.max(MIN_PUBLISH_INTERVAL_MS, scaled(PUBLISH_INTERVAL_MS, timeScale));
}

export interface BudgetPublisherOptions {
  /** The queues this worker process consumes; the budgets of their (queue, kind) pairs are published. */
  queues: readonly string[];
  /** Jobs this process runs at once, per queue. */
  concurrency: number;
  /** The connection to publish on (the worker's own). */
  redis: RedisClient;
  /**
   * Key prefix of the publication (tests use their own, so they never see real workers).
   * @defaultValue `key("worker-budgets")`
   */
  namespace?: string;
  /** The environment the budgets are resolved from. @defaultValue `env()` */
  source?: Env;
  /** @defaultValue `os.hostname()` */
  host?: string;
  /** @defaultValue `process.pid` */
  pid?: number;
}

export interface BudgetPublisher {
  /** The Redis key this process publishes under. */
  readonly key: string;
  /** Publishes now (also done at start and on every interval). */
  publish(): Promise<void>;
  /** Stops publishing and deletes the key, so the process disappears from the page at once. */
  stop(): Promise<void>;
}

/**
 * Publishes, at start and every 10 s (scaled, at least 1 s), the budgets this worker process
 * really uses: `<namespace>:<host>:<pid>` with a TTL of three intervals, so a process that died
 * without `stop()` disappears by itself.
 */
export async function startBudgetPublisher(options: BudgetPublisherOptions): Promise<BudgetPublisher> {
  const source = options.source ?? env();
  const host = options.host ?? hostname();
  const pid = options.pid ?? process.pid;
  const redisKey = `${options.namespace ?? defaultNamespace()}:${host}:${pid}`;
  const interval = publishIntervalMs(source.BOUNDED_TIME_SCALE);
  const startedAt = new Date().toISOString();
  const budgets = pairsOfQueues(options.queues).map(({ queue, kind }) => {
    const b = resolveBudgetUnchecked(queue, kind, source);
    return { queue, kind, softMs: b.softMs, hardMs: b.hardMs, source: b.source, why: b.why };
  });

  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();
  const publish = (): Promise<void> => {
    if (stopped) return inFlight;
    const body: WorkerBudgets = {
      host,
      pid,
      startedAt,
      publishedAt: new Date().toISOString(),
      timeScale: source.BOUNDED_TIME_SCALE,
      concurrency: options.concurrency,
      queues: [...options.queues],
      budgets,
    };
    inFlight = options.redis
      .set(redisKey, JSON.stringify(body), "PX", interval * TTL_INTERVALS)
      .then(() => undefined)
      .catch((err: unknown) =>
        log.warn(
          { err: err instanceof Error ? err.message : String(err), key: redisKey },
          "could not publish worker budgets",
        ),
      );
    return inFlight;
  };

  await publish();
  const timer = setInterval(() => void publish(), interval);
  log.info(
    {
      key: redisKey,
      intervalMs: interval,
      budgets: budgets.map((b) => `${b.queue}/${b.kind}=${b.softMs}/${b.hardMs} (${b.source})`),
    },
    "publishing worker budgets",
  );

  return {
    key: redisKey,
    publish,
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      // A publish still on its way would otherwise recreate the key after the delete.
      await inFlight;
      await options.redis
        .del(redisKey)
        .catch((err: unknown) =>
          log.warn({ err: err instanceof Error ? err.message : String(err) }, "could not delete worker budgets"),
        );
    },
  };
}

/** Escapes Redis glob characters so a namespace is matched literally by SCAN MATCH. */
function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, "\\$&");
}

/**
 * Every live publication (SCAN, never KEYS: a big keyspace must not block Redis), sorted by
 * host and pid. Unreadable publications are skipped and logged.
 */
export async function listWorkerBudgets(
  options: { redis?: RedisClient; namespace?: string } = {},
): Promise<WorkerBudgets[]> {
  const client = options.redis ?? sharedRedis();
  const namespace = options.namespace ?? defaultNamespace();
  const found = new Set<string>(); // SCAN may return a key twice
  for await (const batch of scanKeys(client, `${globEscape(namespace)}:*`, 200)) for (const k of batch) found.add(k);
  const keys = [...found];
  if (keys.length === 0) return [];
  // One MGET for all publications: on a Redis Cluster they share the prefix's slot.
  const values = await client.mget(...keys);
  const workers: WorkerBudgets[] = [];
  values.forEach((value, i) => {
    if (value === null) return; // expired between SCAN and MGET
    try {
      workers.push(workerBudgetsSchema.parse(JSON.parse(value)));
    } catch (err) {
      log.warn(
        { key: keys[i], err: err instanceof Error ? err.message : String(err) },
        "unreadable worker budgets publication",
      );
    }
  });
  return workers.sort((a, b) => a.host.localeCompare(b.host) || a.pid - b.pid);
}
