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
 * a row per request.
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
  const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000);
  const [tally] = await db().$queryRaw<{ count: number }[]>`
    INSERT INTO "AuditRefusalTally" ("address", "route", "status", "minute", "count", "reason", "lastAt")
    VALUES (${r.address.slice(0, 100)}, ${r.route.slice(0, 200)}, ${r.status}, ${minute}, 1, ${r.reason.slice(0, 500)}, now())
    ON CONFLICT ("address", "route", "status", "minute")
    DO UPDATE SET "count" = "AuditRefusalTally"."count" + 1, "reason" = EXCLUDED."reason", "lastAt" = now()
    RETURNING "count"`;
  if (tally?.count === 1) await entry();
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
