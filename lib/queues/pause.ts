import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import type { Described } from "@/lib/http/operator";
import { key, redis } from "@/lib/redis/client";
import { QUEUE_NAMES, type QueueName } from "@/lib/catalog/catalog";
import { queue } from "./queues";

/**
 * Pausing a queue is an on-call control: BullMQ stops handing its waiting jobs to workers (running
 * jobs finish, nothing new starts) until it is resumed. BullMQ's own paused flag is the truth of
 * whether a queue is paused; who paused it and since when are kept beside it, in one Redis hash
 * under the app's prefix (`<prefix>:queues:paused`, field = queue name), so the Queues page can say
 * "Paused by alice since 03:12".
 */

export interface PauseInfo {
  by: string;
  since: Date;
}

/** Who and since when, as stored in the hash: JSON, one field per paused queue. */
const pauseRecordSchema = z.object({ by: z.string().min(1), since: z.iso.datetime() });

export function isQueueName(name: string): name is QueueName {
  return (QUEUE_NAMES as readonly string[]).includes(name);
}

export function pausedHashKey(): string {
  return key("queues", "paused");
}

function parseRecord(raw: string | null | undefined): PauseInfo | null {
  if (!raw) return null;
  try {
    const parsed = pauseRecordSchema.safeParse(JSON.parse(raw));
    return parsed.success ? { by: parsed.data.by, since: new Date(parsed.data.since) } : null;
  } catch {
    return null;
  }
}

/**
 * The paused queues of the catalog, with who paused them and since when. A queue paused outside
 * the app (BullMQ directly, a script) has no record: it is reported as paused by "unknown" since
 * now, rather than hidden, because what matters at 3 a.m. is that nothing on it runs.
 */
export async function pausedQueues(): Promise<Map<string, PauseInfo>> {
  const [flags, records] = await Promise.all([
    Promise.all(QUEUE_NAMES.map((name) => queue(name).isPaused())),
    redis().hgetall(pausedHashKey()),
  ]);
  const paused = new Map<string, PauseInfo>();
  QUEUE_NAMES.forEach((name, i) => {
    if (flags[i]) paused.set(name, parseRecord(records[name]) ?? { by: "unknown", since: new Date() });
  });
  return paused;
}

/** True when the queue is paused; false for a queue the catalog does not know. */
export async function isQueuePaused(name: string): Promise<boolean> {
  if (!isQueueName(name)) return false;
  return queue(name).isPaused();
}

export type PauseResult =
  | { kind: "paused"; queue: QueueName; by: string; since: Date }
  | { kind: "already-paused"; queue: QueueName; by: string; since: Date }
  | { kind: "resumed"; queue: QueueName; pausedBy: string | null; pausedSince: Date | null }
  | { kind: "not-paused"; queue: QueueName }
  | { kind: "unknown-queue"; queue: string };

/** A queue name as it came (a path segment, a form field): bounded, so a huge one is not echoed back. */
export const queueNameInput = z.string().trim().max(100);

/**
 * Pauses a queue. Idempotent: pausing a paused queue changes nothing and keeps the first pauser and
 * time (the answer says who). The record is written before the flag, so a paused queue always has
 * one; a record left without a flag (a failure in between) is ignored by `pausedQueues`.
 */
export async function pauseQueue(name: string, principal: Pick<Principal, "username">): Promise<PauseResult> {
  if (!isQueueName(name)) return { kind: "unknown-queue", queue: name.slice(0, 100) };
  const q = queue(name);
  if (await q.isPaused()) {
    const record = parseRecord(await redis().hget(pausedHashKey(), name));
    return { kind: "already-paused", queue: name, by: record?.by ?? "unknown", since: record?.since ?? new Date() };
  }
  const since = new Date();
  await redis().hset(pausedHashKey(), name, JSON.stringify({ by: principal.username, since: since.toISOString() }));
  await q.pause();
  return { kind: "paused", queue: name, by: principal.username, since };
}

/** Resumes a queue: its waiting jobs start again. Idempotent: resuming a running queue changes nothing. */
export async function resumeQueue(name: string): Promise<PauseResult> {
  if (!isQueueName(name)) return { kind: "unknown-queue", queue: name.slice(0, 100) };
  const q = queue(name);
  const record = parseRecord(await redis().hget(pausedHashKey(), name));
  if (!(await q.isPaused())) {
    await redis().hdel(pausedHashKey(), name);
    return { kind: "not-paused", queue: name };
  }
  await q.resume();
  await redis().hdel(pausedHashKey(), name);
  return { kind: "resumed", queue: name, pausedBy: record?.by ?? null, pausedSince: record?.since ?? null };
}

/** "2026-12-03 12:03:04 UTC", as the dashboard writes times. */
const utc = (d: Date) => `${d.toISOString().replace("T", " ").slice(0, 19)} UTC`;

/** One pause or resume told the one way the audit log, the API and the Queues page read it. */
export function describePause(r: PauseResult): Described {
  const body = (extra: object) => ({ queue: r.queue, ...extra });
  switch (r.kind) {
    case "paused":
      return {
        ok: true,
        status: 200,
        code: "paused",
        message: `Paused ${r.queue}: running jobs finish, no new job starts until it is resumed.`,
        body: body({ paused: true, by: r.by, since: r.since.toISOString(), message: `Paused ${r.queue}.` }),
      };
    case "already-paused":
      return {
        ok: true,
        status: 200,
        code: "already_paused",
        message: `${r.queue} was already paused by ${r.by} since ${utc(r.since)}; nothing changed.`,
        body: body({
          paused: true,
          by: r.by,
          since: r.since.toISOString(),
          message: `${r.queue} was already paused by ${r.by}.`,
        }),
      };
    case "resumed":
      return {
        ok: true,
        status: 200,
        code: "resumed",
        message: `Resumed ${r.queue}${r.pausedBy ? ` (paused by ${r.pausedBy}${r.pausedSince ? ` since ${utc(r.pausedSince)}` : ""})` : ""}: its waiting jobs start again.`,
        body: body({ paused: false, message: `Resumed ${r.queue}.` }),
      };
    case "not-paused":
      return {
        ok: true,
        status: 200,
        code: "not_paused",
        message: `${r.queue} was not paused; nothing changed.`,
        body: body({ paused: false, message: `${r.queue} was not paused.` }),
      };
    case "unknown-queue":
      return {
        ok: false,
        status: 404,
        code: "unknown_queue",
        message: `No queue is called "${r.queue}". Queues: ${QUEUE_NAMES.join(", ")}.`,
      };
  }
}
