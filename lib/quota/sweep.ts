import { db, type Prisma } from "@/lib/db/client";
import { env } from "@/lib/env";
import { metrics } from "@/lib/metrics/metrics";
import { undoKindEffects, type ReserveKind } from "./reserves";
import { reserveTimings } from "./settings";

/** A reserve the sweeper took back. */
export interface Reclaimed {
  reserveId: string;
  tenantId: string;
  kind: ReserveKind;
  subject: string;
  jobId: string | null;
  /** Since it was claimed (real milliseconds). */
  ageMs: number;
  /** Since its last heartbeat. */
  silentMs: number;
}

export interface SweepOptions {
  /** @defaultValue the current time */
  now?: Date;
  /** Real milliseconds. @defaultValue `reserveTimings().windowMs` (the sweep window, scaled) */
  windowMs?: number;
  /** Real milliseconds. @defaultValue `reserveTimings().leaseMs` */
  leaseMs?: number;
  /** Reserves looked at per pass. @defaultValue 500 */
  limit?: number;
  /** Only this tenant's reserves (tests, one-tenant tools). @defaultValue every tenant */
  tenantId?: string;
}

/**
 * Which reserves may be taken back: older than the sweep window **and** silent beyond the lease.
 * A generation that still heartbeats keeps its reserve however long it runs (the provider has
 * no cancel: taking its unit would give away a generation that can still succeed).
 */
function abandoned(now: Date, windowMs: number, leaseMs: number): Prisma.QuotaReserveWhereInput {
  return {
    reservedAt: { lt: new Date(now.getTime() - windowMs) },
    heartbeatAt: { lt: new Date(now.getTime() - leaseMs) },
  };
}

/**
 * One sweep: every abandoned reserve is removed, its unit refunded and its kind's effects undone
 * (`dislike` → the ad's flag cleared), each in one transaction with a ReserveReclaim row. The
 * delete repeats the condition, so a reserve heartbeated or released since it was read is left
 * alone. Counted in `bounded_reserves_reclaimed_total{kind}`.
 */
export async function sweepReserves(options: SweepOptions = {}): Promise<Reclaimed[]> {
  const now = options.now ?? new Date();
  const timings = options.windowMs === undefined || options.leaseMs === undefined ? reserveTimings() : undefined;
  const windowMs = options.windowMs ?? timings!.windowMs;
  const leaseMs = options.leaseMs ?? timings!.leaseMs;
  const where = abandoned(now, windowMs, leaseMs);
  const candidates = await db().quotaReserve.findMany({
    where: { ...where, ...(options.tenantId ? { tenantId: options.tenantId } : {}) },
    orderBy: { reservedAt: "asc" },
    take: options.limit ?? 500,
    select: {
      id: true,
      packId: true,
      tenantId: true,
      kind: true,
      subject: true,
      jobId: true,
      reservedAt: true,
      heartbeatAt: true,
    },
  });
  const reclaimed: Reclaimed[] = [];
  for (const r of candidates) {
    const taken = await db().$transaction(async (tx) => {
      const { count } = await tx.quotaReserve.deleteMany({ where: { id: r.id, ...where } });
      if (count === 0) return false;
      await tx.quotaPack.update({
        where: { id: r.packId },
        data: { remaining: { increment: 1 } },
        select: { id: true },
      });
      await undoKindEffects(tx, r);
      await tx.reserveReclaim.create({
        data: {
          reserveId: r.id,
          packId: r.packId,
          tenantId: r.tenantId,
          kind: r.kind,
          subject: r.subject,
          jobId: r.jobId,
          reservedAt: r.reservedAt,
          heartbeatAt: r.heartbeatAt,
          reclaimedAt: now,
        },
        select: { id: true },
      });
      return true;
    });
    if (!taken) continue;
    const ageMs = now.getTime() - r.reservedAt.getTime();
    metrics.reservesReclaimed.inc({ kind: r.kind });
    metrics.observeReserveAge({ kind: r.kind, end: "reclaimed" }, ageMs / 1000 / env().BOUNDED_TIME_SCALE);
    reclaimed.push({
      reserveId: r.id,
      tenantId: r.tenantId,
      kind: r.kind,
      subject: r.subject,
      jobId: r.jobId,
      ageMs,
      silentMs: now.getTime() - r.heartbeatAt.getTime(),
    });
  }
  return reclaimed;
}
