import { hostname } from "node:os";
import { env, type Env } from "@/lib/env";
import { logger } from "@/lib/log";
import { key, redis as sharedRedis, type RedisClient } from "@/lib/redis/client";
import { lapsingRegistry } from "@/lib/redis/registry";
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

/** The namespace of the publications' registry (lib/redis/registry.ts): `<BOUNDED_REDIS_PREFIX>:worker-budgets`. */
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
   * Namespace of the publications' registry (tests use their own, so they never see real workers).
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
  /** This process's entry in the registry: `<host>:<pid>`. */
  readonly id: string;
  /** Publishes now (also done at start and on every interval). */
  publish(): Promise<void>;
  /** Stops publishing and removes the entry, so the process disappears from the page at once. */
  stop(): Promise<void>;
}

/**
 * Publishes, at start and every 10 s (scaled, at least 1 s), the budgets this worker process
 * really uses, as the entry `<host>:<pid>` of a registry that lets it lapse after three intervals,
 * so a process that died without `stop()` disappears by itself.
 */
export async function startBudgetPublisher(options: BudgetPublisherOptions): Promise<BudgetPublisher> {
  const source = options.source ?? env();
  const host = options.host ?? hostname();
  const pid = options.pid ?? process.pid;
  const publications = lapsingRegistry(options.namespace ?? defaultNamespace());
  const id = `${host}:${pid}`;
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
    inFlight = publications
      .renew(options.redis, id, JSON.stringify(body), interval * TTL_INTERVALS)
      .catch((err: unknown) =>
        log.warn({ err: err instanceof Error ? err.message : String(err), id }, "could not publish worker budgets"),
      );
    return inFlight;
  };

  await publish();
  const timer = setInterval(() => void publish(), interval);
  log.info(
    {
      id,
      intervalMs: interval,
      budgets: budgets.map((b) => `${b.queue}/${b.kind}=${b.softMs}/${b.hardMs} (${b.source})`),
    },
    "publishing worker budgets",
  );

  return {
    id,
    publish,
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      // A publish still on its way would otherwise recreate the entry after the removal.
      await inFlight;
      await publications
        .remove(options.redis, id)
        .catch((err: unknown) =>
          log.warn({ err: err instanceof Error ? err.message : String(err) }, "could not delete worker budgets"),
        );
    },
  };
}

/** Every live publication, sorted by host and pid. Unreadable publications are skipped and logged. */
export async function listWorkerBudgets(
  options: { redis?: RedisClient; namespace?: string } = {},
): Promise<WorkerBudgets[]> {
  const client = options.redis ?? sharedRedis();
  const entries = await lapsingRegistry(options.namespace ?? defaultNamespace()).list(client);
  const workers: WorkerBudgets[] = [];
  for (const { id, value } of entries) {
    try {
      workers.push(workerBudgetsSchema.parse(JSON.parse(value)));
    } catch (err) {
      log.warn({ id, err: err instanceof Error ? err.message : String(err) }, "unreadable worker budgets publication");
    }
  }
  return workers.sort((a, b) => a.host.localeCompare(b.host) || a.pid - b.pid);
}
