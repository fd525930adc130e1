import { createHash, randomUUID } from "node:crypto";
import { type CustomerProgress, getCustomerProgress } from "@/lib/progress/customer-progress";
import { isProgressToken } from "@/lib/job-views/queries";
import { key, redis } from "@/lib/redis/client";
import { sleep } from "@/lib/time";

/**
 * The customer's progress answer, computed once per change of the job and kept in Redis where
 * every web process reads it with one command, instead of once per request from PostgreSQL.
 *
 * A change is announced by the database itself (a trigger on "Job" and "JobEvent",
 * prisma/migrations/…_progress_notifications, heard by ./listener.ts), so every writer is covered
 * without the writers knowing. The rebuild is coalesced: within a process one at a time per job,
 * at most one every `REBUILD_EVERY_MS`; across processes one at a time per job (a lock, and a
 * "dirty" mark the holder checks after releasing it, so a change announced during a rebuild is
 * never lost). A rebuilt answer that reads the same as the stored one keeps its version.
 */

export interface ProgressSnapshot {
  /** Goes up by one with every change a watcher can see; the stream's event id. */
  version: number;
  /** The answer's content hash: the HTTP validator. */
  etag: string;
  /** When the answer was computed (ms since the epoch). */
  computedAt: number;
  /** The answer, exactly as `getCustomerProgress` gives it, as JSON. */
  body: string;
  terminal: boolean;
}

/**
 * At most one rebuild per job every 250 ms in a process: an import commits rows far more often
 * than a person can read them (a 10,000-row import commits a few dozen times a second), and every
 * rebuild is an event written to each of the job's streams. Four updates a second still read as
 * live, and keep the watcher's lag well inside a second.
 */
export const REBUILD_EVERY_MS = 250;

/**
 * How old an answer may be before a read asks for a rebuild (and is still served meanwhile). The
 * answer holds figures that move with the clock alone — the time left, a wait's countdown, "it
 * continues by itself at …" — and a notification may have been missed while a listener
 * reconnected; neither lags more than this.
 */
export const STALE_AFTER_MS = { running: 5_000, ended: 60_000 } as const;

/** Longest a rebuild may hold its job's lock: more than the web's slowest query (10 s). */
const LOCK_MS = 15_000;
/** A job nobody has looked at for a day is dropped from Redis; the next look rebuilds it. */
const KEEP_S = 24 * 3600;

const snapshotKey = (token: string) => key("progress", token);
const lockKey = (token: string) => key("progress", token, "lock");
const dirtyKey = (token: string) => key("progress", token, "dirty");
/** Every key a job's progress snapshot may hold in Redis (a tenant's deletion removes them). */
export const snapshotKeys = (token: string) => [snapshotKey(token), lockKey(token), dirtyKey(token)];
/** The one channel every web process subscribes to: "<token> <version>" per new version. */
export const progressChannel = () => key("progress", "changed");

const owner = randomUUID();

/**
 * This process's copy of the answers it read, trusted only while its subscription to
 * `progressChannel` is live (./hub.ts): every rebuild publishes there, and the hub reads the
 * job's new answer when it hears of it. A read then costs no round trip to Redis at all, and a
 * poll is answered before the framework routes it (./front-door.ts).
 */
const copies = globalThis as unknown as {
  __boundedProgressCopies?: {
    trusted: boolean;
    byToken: Map<string, ProgressSnapshot>;
    generation: Map<string, number>;
  };
};
copies.__boundedProgressCopies ??= { trusted: false, byToken: new Map(), generation: new Map() };
const local = copies.__boundedProgressCopies;
/** Copies kept at most (oldest dropped first): the jobs being watched right now. */
const COPIES_KEPT = 10_000;

/**
 * A new version of a job's answer was announced (./hub.ts): a read already on its way may bring
 * the old one, so it will not be kept. The copy this process holds, if any, is still served until
 * `readStoredSnapshot` brings the new one: for that one round trip to Redis a poll gets the answer
 * as it stood a moment ago, as it would have from Redis during a rebuild. Returns whether a copy is
 * held.
 */
export function copyOutdated(token: string): boolean {
  local.generation.set(token, (local.generation.get(token) ?? 0) + 1);
  return local.byToken.has(token);
}

/** Forgets this process's copy of a job's answer (its new version could not be read). */
export function forgetCopy(token: string): void {
  local.byToken.delete(token);
  local.generation.set(token, (local.generation.get(token) ?? 0) + 1);
}

/** Whether copies may be kept: only while the subscription that invalidates them is live. */
export function trustCopies(trusted: boolean): void {
  local.trusted = trusted;
  local.byToken.clear();
  local.generation.clear();
}

/** The answer for a progress link: this process's copy when it holds one, else the stored one. */
export async function readSnapshot(token: string): Promise<ProgressSnapshot | null> {
  const copy = local.trusted ? local.byToken.get(token) : undefined;
  return copy ?? readStoredSnapshot(token);
}

/**
 * The answer stored in Redis for a progress link, or null when none is stored (yet); kept as this
 * process's copy unless a newer version was announced while the read was on its way.
 */
export async function readStoredSnapshot(token: string): Promise<ProgressSnapshot | null> {
  const generation = local.generation.get(token) ?? 0;
  const [version, etag, computedAt, body, terminal] = await redis().hmget(
    snapshotKey(token),
    "version",
    "etag",
    "computedAt",
    "body",
    "terminal",
  );
  if (!version || !etag || !computedAt || !body) return null;
  const snapshot = { version: Number(version), etag, computedAt: Number(computedAt), body, terminal: terminal === "1" };
  if (local.trusted && (local.generation.get(token) ?? 0) === generation) {
    // Kept as the newest: when the map is full, the copy read longest ago goes.
    local.byToken.delete(token);
    if (local.byToken.size >= COPIES_KEPT) local.byToken.delete(local.byToken.keys().next().value!);
    local.byToken.set(token, snapshot);
  }
  return snapshot;
}

/** The HTTP validator of an answer: a strong ETag over its exact bytes. */
export function etagOf(body: string): string {
  return `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`;
}

/**
 * Computes the answer from PostgreSQL and stores it as the next version when it differs from the
 * stored one (then announces it on `progressChannel`). Null when the link opens no job. Only the
 * holder of the job's lock calls this, so versions never race.
 */
async function rebuild(token: string): Promise<ProgressSnapshot | null> {
  // The stored answer itself, never this process's copy: a copy may be one version behind. Read
  // alongside the answer (only the lock's holder writes it), so the rebuild waits for one of them.
  const [progress, stored] = await Promise.all([getCustomerProgress(token), readStoredSnapshot(token)]);
  if (!progress) return null;
  const body = JSON.stringify(progress);
  const etag = etagOf(body);
  const computedAt = Date.now();
  const k = snapshotKey(token);
  const terminal = progress.terminal ? "1" : "0";
  if (stored?.etag === etag) {
    // Same answer, same version; announced all the same, so copies learn it is fresh.
    await redis()
      .multi()
      .hset(k, "computedAt", computedAt)
      .expire(k, KEEP_S)
      .publish(progressChannel(), `${token} ${stored.version}`)
      .exec();
    return { ...stored, computedAt };
  }
  const version = (stored?.version ?? 0) + 1;
  await redis()
    .multi()
    .hset(k, { version, etag, computedAt, body, terminal })
    .expire(k, KEEP_S)
    .publish(progressChannel(), `${token} ${version}`)
    .exec();
  return { version, etag, computedAt, body, terminal: progress.terminal };
}

/**
 * Rebuilds a job's answer unless another process is already doing so, in which case that process
 * rebuilds once more after it is done (the dirty mark). Returns the answer when this call built it.
 */
async function rebuildAcrossProcesses(token: string): Promise<ProgressSnapshot | null | undefined> {
  const r = redis();
  await r.set(dirtyKey(token), "1", "PX", LOCK_MS);
  let built: ProgressSnapshot | null | undefined;
  while ((await r.set(lockKey(token), owner, "PX", LOCK_MS, "NX")) === "OK") {
    try {
      await r.del(dirtyKey(token));
      built = await rebuild(token);
    } finally {
      if ((await r.get(lockKey(token))) === owner) await r.del(lockKey(token));
    }
    // Marked while the lock was held: the holder (this process) rebuilds once more.
    if (!(await r.exists(dirtyKey(token)))) break;
  }
  return built;
}

/** A job's rebuilds in this process: the one under way, and whether another was asked for since it started. */
interface Rebuilds {
  /** Asked for since the round under way (if any) started: one more round will run. */
  again: boolean;
  /** The round under way; settles when its rebuild has. */
  round: Promise<void> | null;
  /** The next round's outcome, for whoever asked for it. */
  next: { promise: Promise<void>; resolve(): void; reject(err: unknown): void };
}

const inFlight = globalThis as unknown as { __boundedProgressRebuilds?: Map<string, Rebuilds> };
inFlight.__boundedProgressRebuilds ??= new Map();
const rebuilding = inFlight.__boundedProgressRebuilds;

function deferred(): Rebuilds["next"] {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Nobody may be waiting for a round (a change announced with no page open): its failure is the caller's to log.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/**
 * Asks for a job's answer to be rebuilt. Within a process, rebuilds of a job start at least
 * `REBUILD_EVERY_MS` apart: what is announced in between waits for the next one, and all of it
 * goes in that one rebuild — during an import, a job's watchers get at most one new version per
 * spacing, however often its rows commit. Resolves when the answer reflects every change
 * announced before the call; rejects with the error of the rebuild that was to reflect it.
 */
export function requestRebuild(token: string): Promise<void> {
  const running = rebuilding.get(token);
  if (running) {
    running.again = true;
    return running.next.promise;
  }
  const entry: Rebuilds = { again: true, round: null, next: deferred() };
  const first = entry.next.promise;
  rebuilding.set(token, entry);
  void (async () => {
    try {
      let started = Number.NEGATIVE_INFINITY;
      for (;;) {
        await sleep(Math.max(0, started + REBUILD_EVERY_MS - Date.now()));
        if (!entry.again) break;
        entry.again = false;
        const { resolve, reject } = entry.next;
        entry.next = deferred();
        started = Date.now();
        entry.round = rebuildAcrossProcesses(token).then(resolve, reject);
        await entry.round;
        entry.round = null;
      }
    } finally {
      rebuilding.delete(token);
    }
  })();
  return first;
}

/**
 * What to wait for before this process's stored answer reflects every change announced so far:
 * the next round when one was asked for, else the round under way; undefined when nothing is.
 */
function rebuildUnderWay(token: string): Promise<void> | undefined {
  const entry = rebuilding.get(token);
  if (!entry) return undefined;
  return entry.again ? entry.next.promise : (entry.round ?? undefined);
}

/** Whether an answer is old enough that a read should ask for a fresh one. */
export function isStale(snapshot: ProgressSnapshot, now = Date.now()): boolean {
  return now - snapshot.computedAt > (snapshot.terminal ? STALE_AFTER_MS.ended : STALE_AFTER_MS.running);
}

/**
 * The progress answer for a link, as the page, the API and the stream serve it: the stored
 * snapshot (rebuilt in the background when it is old), or, the first time a job is looked at, one
 * built now. Null for a link that opens no job — the same answer as `getCustomerProgress`.
 */
export async function getProgressSnapshot(token: string): Promise<ProgressSnapshot | null> {
  if (!isProgressToken(token)) return null;
  const stored = await readSnapshot(token);
  if (stored) {
    // A page that reads "ended" stops watching: while this process rebuilds the job (a change was
    // announced), an ended answer waits for the rebuild rather than be the last word.
    const running = rebuildUnderWay(token);
    if (stored.terminal && running !== undefined) {
      // A rebuild that failed leaves the stored answer as the best there is.
      await running.catch(() => undefined);
      return (await readStoredSnapshot(token)) ?? stored;
    }
    if (isStale(stored)) void requestRebuild(token).catch(() => undefined);
    return stored;
  }
  // The first look at a job: a rebuild this process already runs (its creation was announced) is
  // waited for rather than repeated.
  await rebuildUnderWay(token)?.catch(() => undefined);
  const settled = await readSnapshot(token);
  if (settled) return settled;
  const built = await rebuildAcrossProcesses(token);
  if (built !== undefined) return built;
  // Another process is building it right now: this request computes its own copy.
  const progress = await getCustomerProgress(token);
  if (!progress) return null;
  const body = JSON.stringify(progress);
  return { version: 0, etag: etagOf(body), computedAt: Date.now(), body, terminal: progress.terminal };
}

/**
 * The answer this process holds for a link, when it may be served as it is without asking Redis
 * or PostgreSQL anything: a copy the live subscription vouches for, not stale, and not an ended
 * answer while the job is being rebuilt (`getProgressSnapshot` waits for that rebuild). Otherwise
 * undefined, and the caller takes the full path.
 */
export function heldSnapshot(token: string, now = Date.now()): ProgressSnapshot | undefined {
  const copy = local.trusted ? local.byToken.get(token) : undefined;
  if (!copy || isStale(copy, now) || (copy.terminal && rebuildUnderWay(token) !== undefined)) return undefined;
  return copy;
}

/** The parsed answer of a snapshot. */
export function progressOf(snapshot: ProgressSnapshot): CustomerProgress {
  return JSON.parse(snapshot.body) as CustomerProgress;
}
