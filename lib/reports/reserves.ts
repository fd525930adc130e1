import "server-only";
import { db } from "@/lib/db/client";
import { env } from "@/lib/env";
import {
  GENERATION_POLICY,
  reservationProblems,
  SWEEP_WINDOW_WHY,
  worstCaseMs,
  worstCaseTerms,
  type WorstCaseTerm,
} from "@/lib/catalog/generation-policy";
import { sweepPolicy } from "@/lib/quota/settings";

/** What /reserves draws and `GET /api/reserves` returns: plain JSON, production time throughout. */
export interface ReservesReport {
  asOf: string;
  /** BOUNDED_TIME_SCALE: ages below are divided by it, so they compare with the production policy. */
  timeScale: number;
  policy: {
    terms: WorstCaseTerm[];
    worstCaseMs: number;
    margin: number;
    /** worst case × margin: the shortest safe window. */
    neededMs: number;
    windowMs: number;
    windowSource: string;
    windowWhy: string;
    leaseMs: number;
    heartbeatMs: number;
    intervalMs: number;
    problems: string[];
  };
  live: {
    count: number;
    byKind: { generate: number; dislike: number };
    oldestMs: number | null;
    medianMs: number | null;
    /** Past the worst case but still heartbeating: slow, alive, never taken. */
    pastWorstCase: number;
    /** Silent beyond the lease: the sweeper takes them once they are past the window. */
    silent: number;
    /** One-minute buckets of age; the last one holds everything older. */
    buckets: { fromMs: number; toMs: number | null; generate: number; dislike: number }[];
  };
  reclaimed: {
    /** The last 24 hours, per hour (oldest first). */
    hours: { hour: string; generate: number; dislike: number }[];
    total24h: number;
    totalAll: number;
  };
  /** Tenants' packs, most recently changed first (at most `PACKS_SHOWN`), and the totals over every pack. */
  packs: {
    rows: {
      tenant: string;
      size: number;
      remaining: number;
      live: number;
      spent: number;
      openDebts: number;
      updatedAt: string;
    }[];
    count: number;
    totals: { size: number; remaining: number; live: number; spent: number; openDebts: number };
    /** Packs with nothing left to claim. */
    empty: number;
  };
  late: {
    counts: { charged: number; debt: number; none: number; openDebts: number };
    recent: {
      reserveId: string;
      tenant: string;
      kind: string;
      adId: string;
      outcome: string;
      resolution: string;
      heldMs: number;
      releasedAt: string;
      debtSettledAt: string | null;
    }[];
  };
}

const MINUTE = 60_000;
/** Packs listed on /reserves; the totals cover all of them. */
const PACKS_SHOWN = 50;

export async function getReservesReport(now: Date = new Date()): Promise<ReservesReport> {
  const e = env();
  const scale = e.BOUNDED_TIME_SCALE;
  const sweep = sweepPolicy(e);
  const worst = worstCaseMs(GENERATION_POLICY);

  const reserves = await readReserves(now);
  const packs = await readPacks();
  const tenants = await readTenantSlugs([
    ...reserves.recent.map((r) => r.tenantId),
    ...packs.packRows.map((p) => p.tenantId),
  ]);

  return {
    asOf: now.toISOString(),
    timeScale: scale,
    policy: policySection(sweep, worst),
    live: liveSection(reserves.live, now, scale, sweep, worst),
    reclaimed: reclaimedSection(reserves.hourly, reserves.totalAll, now),
    packs: packsSection(packs, tenants, reserves.live.length, reserves.openDebts),
    late: lateSection(reserves, tenants, scale),
  };
}

type Sweep = ReturnType<typeof sweepPolicy>;

/** The live reserves, the last 24 hours' reclaims per hour and kind, and the late releases. */
async function readReserves(now: Date) {
  const since = new Date(now.getTime() - 24 * 3600_000);
  const [live, hourly, totalAll, lateCounts, openDebts, recent] = await Promise.all([
    db().quotaReserve.findMany({
      select: { kind: true, reservedAt: true, heartbeatAt: true },
      orderBy: { reservedAt: "asc" },
      take: 20_000,
    }),
    db().$queryRaw<{ hour: Date; kind: "generate" | "dislike"; n: bigint }[]>`
      SELECT date_trunc('hour', "reclaimedAt") AS hour, kind, count(*) AS n
      FROM "ReserveReclaim" WHERE "reclaimedAt" >= ${since} GROUP BY 1, 2`,
    db().reserveReclaim.count(),
    db().lateRelease.groupBy({ by: ["resolution"], _count: { _all: true } }),
    db().lateRelease.count({ where: { resolution: "debt", debtSettledAt: null } }),
    db().lateRelease.findMany({
      orderBy: { releasedAt: "desc" },
      take: 50,
      select: {
        reserveId: true,
        tenantId: true,
        kind: true,
        subject: true,
        outcome: true,
        resolution: true,
        reservedAt: true,
        releasedAt: true,
        debtSettledAt: true,
      },
    }),
  ]);
  return { live, hourly, totalAll, lateCounts, openDebts, recent };
}

type Reserves = Awaited<ReturnType<typeof readReserves>>;

/** The packs shown, the totals over every pack, and per pack its spends, live reserves and open debts. */
async function readPacks() {
  const [packRows, packTotals, packCount, emptyPacks, spentAll, spentByPack, liveByPack, debtsByPack] =
    await Promise.all([
      db().quotaPack.findMany({
        orderBy: { updatedAt: "desc" },
        take: PACKS_SHOWN,
        select: { id: true, tenantId: true, size: true, remaining: true, updatedAt: true },
      }),
      db().quotaPack.aggregate({ _sum: { size: true, remaining: true } }),
      db().quotaPack.count(),
      db().quotaPack.count({ where: { remaining: { lte: 0 } } }),
      db().quotaSpend.count(),
      db().quotaSpend.groupBy({ by: ["packId"], _count: { _all: true } }),
      db().quotaReserve.groupBy({ by: ["packId"], _count: { _all: true } }),
      db().lateRelease.groupBy({
        by: ["packId"],
        where: { resolution: "debt", debtSettledAt: null },
        _count: { _all: true },
      }),
    ]);
  const perPack = (rows: { packId: string; _count: { _all: number } }[]) =>
    new Map(rows.map((r) => [r.packId, r._count._all]));
  return {
    packRows,
    packTotals,
    packCount,
    emptyPacks,
    spentAll,
    spentOf: perPack(spentByPack),
    liveOf: perPack(liveByPack),
    debtsOf: perPack(debtsByPack),
  };
}

/** The slug of each tenant named, by id. */
async function readTenantSlugs(tenantIds: string[]): Promise<Map<string, string>> {
  return new Map(
    (
      await db().tenant.findMany({
        where: { id: { in: [...new Set(tenantIds)] } },
        select: { id: true, slug: true },
      })
    ).map((t) => [t.id, t.slug]),
  );
}

/** The worst case, its terms and margin beside the sweeper's window and timings, with any problem between them. */
function policySection(sweep: Sweep, worst: number): ReservesReport["policy"] {
  return {
    terms: worstCaseTerms(GENERATION_POLICY),
    worstCaseMs: worst,
    margin: sweep.margin,
    neededMs: worst * sweep.margin,
    windowMs: sweep.windowMs,
    windowSource: sweep.windowSource,
    windowWhy: SWEEP_WINDOW_WHY,
    leaseMs: sweep.leaseMs,
    heartbeatMs: sweep.heartbeatMs,
    intervalMs: sweep.intervalMs,
    problems: reservationProblems({ policy: GENERATION_POLICY, sweep, windowSource: sweep.windowSource }),
  };
}

/** The live reserves' ages in production time: counted, past the worst case, silent, and per minute of age. */
function liveSection(
  live: Reserves["live"],
  now: Date,
  scale: number,
  sweep: Sweep,
  worst: number,
): ReservesReport["live"] {
  // Ages in production time, so they sit on the same axis as the policy.
  const ages = live.map((r) => ({
    kind: r.kind,
    ageMs: (now.getTime() - r.reservedAt.getTime()) / scale,
    silentMs: (now.getTime() - r.heartbeatAt.getTime()) / scale,
  }));
  const sorted = ages.map((a) => a.ageMs).sort((a, b) => a - b);
  const lastMinute = Math.max(35, Math.ceil(sweep.windowMs / MINUTE) + 10);
  const buckets = Array.from({ length: lastMinute + 1 }, (_, i) => ({
    fromMs: i * MINUTE,
    toMs: i === lastMinute ? null : (i + 1) * MINUTE,
    generate: 0,
    dislike: 0,
  }));
  for (const a of ages) buckets[Math.min(lastMinute, Math.max(0, Math.floor(a.ageMs / MINUTE)))]![a.kind]++;

  return {
    count: ages.length,
    byKind: {
      generate: ages.filter((a) => a.kind === "generate").length,
      dislike: ages.filter((a) => a.kind === "dislike").length,
    },
    oldestMs: sorted.at(-1) ?? null,
    medianMs: sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)]! : null,
    pastWorstCase: ages.filter((a) => a.ageMs > worst && a.silentMs <= sweep.leaseMs).length,
    silent: ages.filter((a) => a.silentMs > sweep.leaseMs).length,
    buckets,
  };
}

/** The reclaims of the last 24 hours per hour and kind, oldest first, and the totals. */
function reclaimedSection(hourly: Reserves["hourly"], totalAll: number, now: Date): ReservesReport["reclaimed"] {
  const hours = Array.from({ length: 24 }, (_, i) => {
    const h = new Date(Math.floor(now.getTime() / 3600_000) * 3600_000 - (23 - i) * 3600_000);
    return { hour: h.toISOString(), generate: 0, dislike: 0 };
  });
  for (const row of hourly) {
    const slot = hours.find((h) => h.hour === new Date(row.hour).toISOString());
    if (slot) slot[row.kind] += Number(row.n);
  }
  return { hours, total24h: hours.reduce((n, h) => n + h.generate + h.dislike, 0), totalAll };
}

/** The packs shown with their tenants and per-pack counts, and the totals over every pack. */
function packsSection(
  packs: Awaited<ReturnType<typeof readPacks>>,
  tenants: Map<string, string>,
  liveCount: number,
  openDebts: number,
): ReservesReport["packs"] {
  return {
    rows: packs.packRows.map((p) => ({
      tenant: tenants.get(p.tenantId) ?? p.tenantId,
      size: p.size,
      remaining: p.remaining,
      live: packs.liveOf.get(p.id) ?? 0,
      spent: packs.spentOf.get(p.id) ?? 0,
      openDebts: packs.debtsOf.get(p.id) ?? 0,
      updatedAt: p.updatedAt.toISOString(),
    })),
    count: packs.packCount,
    totals: {
      size: packs.packTotals._sum.size ?? 0,
      remaining: packs.packTotals._sum.remaining ?? 0,
      live: liveCount,
      spent: packs.spentAll,
      openDebts,
    },
    empty: packs.emptyPacks,
  };
}

/** The late releases counted by resolution, and the latest ones with their tenants and how long they were held. */
function lateSection(
  { lateCounts, openDebts, recent }: Reserves,
  tenants: Map<string, string>,
  scale: number,
): ReservesReport["late"] {
  const count = (resolution: string) => lateCounts.find((c) => c.resolution === resolution)?._count._all ?? 0;
  return {
    counts: { charged: count("charged"), debt: count("debt"), none: count("none"), openDebts },
    recent: recent.map((r) => ({
      reserveId: r.reserveId,
      tenant: tenants.get(r.tenantId) ?? r.tenantId,
      kind: r.kind,
      adId: r.subject,
      outcome: r.outcome,
      resolution: r.resolution,
      heldMs: (r.releasedAt.getTime() - r.reservedAt.getTime()) / scale,
      releasedAt: r.releasedAt.toISOString(),
      debtSettledAt: r.debtSettledAt?.toISOString() ?? null,
    })),
  };
}
