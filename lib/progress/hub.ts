import { logger } from "@/lib/log";
import { createRedis, type RedisClient } from "@/lib/redis/client";
import {
  copyOutdated,
  forgetCopy,
  type ProgressSnapshot,
  progressChannel,
  readStoredSnapshot,
  trustCopies,
} from "./snapshot";

const log = logger("progress");

/** What a watcher is handed: each new version of its job's answer, and the end of the process. */
export interface Watcher {
  deliver(snapshot: ProgressSnapshot): void;
  close(): void;
}

interface Hub {
  subscriber: RedisClient;
  ready: Promise<void>;
  watchers: Map<string, Set<Watcher>>;
}

const state = globalThis as unknown as { __boundedProgressHub?: Hub };

/**
 * One Redis subscription per web process, fanned out in memory: however many pages watch, the
 * process holds one connection and reads each new version of a job's answer once, for all of its
 * watchers on that job.
 */
function hub(): Hub {
  if (state.__boundedProgressHub) return state.__boundedProgressHub;
  // A subscriber waits for Redis and resubscribes by itself after a reconnect.
  const subscriber = createRedis("worker");
  subscriber.on("error", () => undefined);
  const watchers = new Map<string, Set<Watcher>>();
  subscriber.on("message", (_channel: string, message: string) => {
    const token = message.split(" ")[0]!;
    // A job this process answers polls for gets its new copy at once, read once for all of them,
    // so the polls that follow are answered from memory (./front-door.ts).
    const held = copyOutdated(token);
    if (!held && !watchers.has(token)) return;
    readStoredSnapshot(token)
      .then((snapshot) => {
        if (snapshot) for (const w of watchers.get(token) ?? []) w.deliver(snapshot);
        else forgetCopy(token);
      })
      .catch((err: unknown) => {
        forgetCopy(token);
        log.warn({ err: err instanceof Error ? err.message : String(err) }, "progress fan-out read failed");
      });
  });
  // Copies of answers are trusted only while this subscription can tell of new versions.
  subscriber.on("close", () => trustCopies(false));
  subscriber.on(
    "ready",
    () =>
      void subscriber.subscribe(progressChannel()).then(
        () => trustCopies(true),
        () => undefined,
      ),
  );
  const ready = subscriber.subscribe(progressChannel()).then(() => trustCopies(true));
  state.__boundedProgressHub = { subscriber, ready, watchers };
  // The server waits for open connections before it exits: its streams end first.
  process.once("SIGTERM", () => void closeHub());
  return state.__boundedProgressHub;
}

/** Starts this process's subscription (once); resolves when it is live. */
export function subscribeToProgress(): Promise<void> {
  return hub().ready;
}

/** Adds a watcher of one job; resolves once the process's subscription is live. Returns its removal. */
export async function watch(token: string, watcher: Watcher): Promise<() => void> {
  const h = hub();
  let set = h.watchers.get(token);
  if (!set) {
    set = new Set();
    h.watchers.set(token, set);
  }
  set.add(watcher);
  const remove = () => {
    set.delete(watcher);
    if (set.size === 0 && h.watchers.get(token) === set) h.watchers.delete(token);
  };
  await h.ready;
  return remove;
}

/** How many watchers this process holds. */
export function watcherCount(): number {
  let n = 0;
  for (const set of state.__boundedProgressHub?.watchers.values() ?? []) n += set.size;
  return n;
}

/** Ends every stream of this process and its subscription (shutdown, tests). */
export async function closeHub(): Promise<void> {
  const h = state.__boundedProgressHub;
  state.__boundedProgressHub = undefined;
  if (!h) return;
  for (const set of h.watchers.values()) for (const w of set) w.close();
  h.watchers.clear();
  trustCopies(false);
  await h.subscriber.quit().catch(() => h.subscriber.disconnect());
}
