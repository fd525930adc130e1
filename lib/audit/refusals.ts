import { db, type Prisma } from "@/lib/db/client";
import type { Principal } from "@/lib/auth/roles";
import { logger } from "@/lib/log";
import { recordAudit } from "./audit";

const log = logger("audit");

export interface Refusal {
  /** Who was refused: null without valid credentials. */
  principal: Principal | null;
  address: string;
  /** The route or action, e.g. "POST /api/jobs/:id/retry". */
  route: string;
  status: number;
  reason: string;
  /** How the audit entry names the call. @defaultValue action "request.refused", the route as target */
  entry?: { action: string; target?: string | null; params?: Prisma.InputJsonValue; message?: string };
}

/**
 * Records a refused call. A known caller's refusal is an audit entry of its own. An anonymous one
 * adds one to the count of its address, route and status in this minute, and only the first of
 * the minute is also an audit entry: a flood of 401s costs one entry and one counter a minute, not
 * a row per request. Refusals of one count that arrive while its write is out are added by the
 * next write, together (`tallyRefusal`): a flood is a few statements, not one per request queued
 * on the same row's lock.
 */
export async function recordRefusal(r: Refusal): Promise<void> {
  const entry = () =>
    recordAudit({
      principal: r.principal,
      action: r.entry?.action ?? "request.refused",
      target: r.entry ? (r.entry.target ?? null) : r.route.slice(0, 200),
      params: r.entry?.params,
      result: "refused",
      message: r.entry?.message ?? `refused (${r.status}): ${r.reason}`,
      clientAddress: r.address,
    });
  if (r.principal) return entry();
  if (await tallyRefusal(r)) await entry();
}

/** Anonymous refusals of one count waiting for one write: how many, and the count after it. */
interface TallyBatch {
  added: number;
  written: Promise<number>;
}

/** Per count (address, route, status, minute): the end of its latest write, and the batch waiting to follow it. */
const writing = new Map<string, Promise<unknown>>();
const gathering = new Map<string, TallyBatch>();

/**
 * Adds one anonymous refusal to its minute's count; true when it is the minute's first. Refusals
 * of a count that arrive while its write is out wait together and are added by the next write.
 */
function tallyRefusal(r: Refusal): Promise<boolean> {
  const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000);
  const key = JSON.stringify([r.address, r.route, r.status, minute.getTime()]);
  let batch = gathering.get(key);
  if (!batch) {
    const previous = writing.get(key) ?? Promise.resolve();
    const next: TallyBatch = { added: 0, written: Promise.resolve(0) };
    next.written = previous.then(() => {
      // From here on, refusals of this count gather for the write after this one.
      gathering.delete(key);
      return writeTally(r, minute, next.added);
    });
    // Settles (never rejects) once the write has ended; the last one of a count leaves the map.
    const ended: Promise<unknown> = next.written
      .catch(() => undefined)
      .then(() => {
        if (writing.get(key) === ended) writing.delete(key);
      });
    writing.set(key, ended);
    gathering.set(key, next);
    batch = next;
  }
  const first = batch.added === 0;
  batch.added++;
  const joined = batch;
  // The batch that made the row (its count is the batch's own) holds the minute's first refusal.
  return joined.written.then((count) => first && count === joined.added);
}

/** Adds `added` refusals to the count of `r`'s address, route and status in `minute`; the count after. */
async function writeTally(r: Refusal, minute: Date, added: number): Promise<number> {
  const [tally] = await db().$queryRaw<{ count: number }[]>`
    INSERT INTO "AuditRefusalTally" ("address", "route", "status", "minute", "count", "reason", "lastAt")
    VALUES (${r.address.slice(0, 100)}, ${r.route.slice(0, 200)}, ${r.status}, ${minute}, ${added}, ${r.reason.slice(0, 500)}, now())
    ON CONFLICT ("address", "route", "status", "minute")
    DO UPDATE SET "count" = "AuditRefusalTally"."count" + EXCLUDED."count", "reason" = EXCLUDED."reason", "lastAt" = now()
    RETURNING "count"`;
  return Number(tally?.count ?? 0);
}

/** For the refusals of plain routes: a failure to record is logged, never turned into a 500. */
export async function recordRefusalQuietly(r: Refusal): Promise<void> {
  await recordRefusal(r).catch((err) =>
    log.error({ err, route: r.route, status: r.status }, "could not record a refused call"),
  );
}

const RECORDED = Symbol.for("bounded.refusalRecorded");

/** Marks an error whose refusal is already in the audit log, so the route does not record it twice. */
export function markRecorded<E>(err: E): E {
  if (err && typeof err === "object") (err as { [RECORDED]?: true })[RECORDED] = true;
  return err;
}

export function isRecorded(err: unknown): boolean {
  return !!err && typeof err === "object" && (err as { [RECORDED]?: true })[RECORDED] === true;
}
