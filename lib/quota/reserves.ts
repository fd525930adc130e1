import { db, type Prisma } from "@/lib/db/client";
import { env } from "@/lib/env";
import { logger } from "@/lib/log";
import { metrics } from "@/lib/metrics/metrics";
import { QuotaRefused } from "./errors";

/**
 * Claim, heartbeat and release of quota reserves. Each is one transaction: a unit taken from a
 * pack is always either held by a live reserve, charged by a spend (or owed by a debt), or back
 * in the pack — `remaining + spends + live reserves = size` at every commit.
 */

const log = logger("quota");

export type ReserveKind = "generate" | "dislike";
export type ReleaseOutcome = "succeeded" | "failed";

/** A unit held by one generation, as `claim` returns it. */
export interface Reserve {
  id: string;
  packId: string;
  tenantId: string;
  kind: ReserveKind;
  /** The ad whose card is generated. */
  subject: string;
  jobId: string | null;
  reservedAt: Date;
}

export type ReleaseResult =
  /** Charged: one spend recorded, the reserve removed. */
  | { type: "spent" }
  /** Refunded: the unit is back in the pack. */
  | { type: "refunded" }
  /** The sweeper had taken the reserve back: charged again, recorded as a debt, or nothing to do for a failure. */
  | { type: "late"; resolution: "charged" | "debt" | "none" }
  /** Released before (a repeated call): nothing changed. */
  | { type: "already_released" };

/** What a successful generation writes with its charge (the image), in the release's transaction. */
export type ReleaseEffect = (tx: Prisma.TransactionClient) => Promise<unknown>;

const productionSeconds = (ms: number) => ms / 1000 / env().BOUNDED_TIME_SCALE;

/** Sets the ad's `aiDislikeRetryUsed`; with `onlyIfClear`, only when it is not set (0 rows otherwise). */
async function setDislikeFlag(
  tx: Prisma.TransactionClient,
  adId: string,
  value: boolean,
  onlyIfClear = false,
): Promise<number> {
  const json = value ? "true" : "false";
  return onlyIfClear
    ? tx.$executeRaw`UPDATE "Ad" SET params = jsonb_set(COALESCE(params, '{}'::jsonb), '{aiDislikeRetryUsed}', ${json}::jsonb)
        WHERE id = ${adId}::uuid AND COALESCE((params->>'aiDislikeRetryUsed')::boolean, false) = false`
    : tx.$executeRaw`UPDATE "Ad" SET params = jsonb_set(COALESCE(params, '{}'::jsonb), '{aiDislikeRetryUsed}', ${json}::jsonb)
        WHERE id = ${adId}::uuid`;
}

/** Undoes what a reserve of this kind did besides holding its unit (used by release and the sweeper). */
export async function undoKindEffects(
  tx: Prisma.TransactionClient,
  reserve: { kind: ReserveKind; subject: string },
): Promise<void> {
  if (reserve.kind === "dislike") await setDislikeFlag(tx, reserve.subject, false);
}

/**
 * Takes one unit of the tenant's pack for a generation of `subject`'s card. The unit is taken by
 * one conditional UPDATE (`remaining > 0`), so concurrent claims never overdraw. A `dislike`
 * claim also sets the ad's `aiDislikeRetryUsed` (refused while it is set, and once a dislike
 * regeneration was delivered). Refusals throw `QuotaRefused` and change nothing.
 *
 * A job's later attempt takes over the reserve an earlier attempt of the same job still holds (a
 * worker killed mid-generation leaves it live until the sweeper's window): the unit is already
 * this job's, so it is neither taken twice nor refused by the job's own hold (a dislike's flag).
 * Attempts are fenced, so the earlier one cannot deliver against it any more.
 */
export async function claim(input: {
  tenantId: string;
  kind: ReserveKind;
  subject: string;
  jobId?: string | null;
  now?: Date;
}): Promise<Reserve> {
  const now = input.now ?? new Date();
  const { tenantId, kind, subject } = input;
  return db().$transaction(async (tx) => {
    if (input.jobId) {
      const held = await tx.quotaReserve.findFirst({
        where: { jobId: input.jobId, tenantId, kind, subject },
        select: { id: true, packId: true, tenantId: true, kind: true, subject: true, jobId: true, reservedAt: true },
      });
      // Gone meanwhile (the sweeper took it back and refunded it): claim afresh below.
      if (
        held &&
        (await tx.quotaReserve.updateMany({ where: { id: held.id }, data: { heartbeatAt: now } })).count === 1
      )
        return held;
    }
    const ad = await tx.ad.findFirst({ where: { id: subject, tenantId }, select: { id: true } });
    if (!ad) throw new QuotaRefused({ code: "ad_not_found", adId: subject });
    if (kind === "dislike") {
      // The ad's row lock (taken here) orders dislike claims and releases of one ad, so the check
      // below sees every delivered dislike regeneration.
      if ((await setDislikeFlag(tx, subject, true, true)) === 0)
        throw new QuotaRefused({ code: "dislike_in_progress", adId: subject });
      const delivered =
        (await tx.quotaSpend.count({ where: { subject, kind: "dislike" } })) +
        (await tx.lateRelease.count({ where: { subject, kind: "dislike", outcome: "succeeded", resolution: "debt" } }));
      if (delivered > 0) throw new QuotaRefused({ code: "dislike_already_used", adId: subject });
    }
    const pack = await tx.quotaPack.findUnique({ where: { tenantId }, select: { id: true, size: true } });
    if (!pack) throw new QuotaRefused({ code: "no_pack", tenant: tenantId });
    const { count } = await tx.quotaPack.updateMany({
      where: { id: pack.id, remaining: { gt: 0 } },
      data: { remaining: { decrement: 1 } },
    });
    if (count === 0) throw new QuotaRefused({ code: "pack_empty", tenant: tenantId, size: pack.size });
    const reserve = await tx.quotaReserve.create({
      data: { packId: pack.id, tenantId, kind, subject, jobId: input.jobId ?? null, reservedAt: now, heartbeatAt: now },
      select: { id: true, packId: true, tenantId: true, kind: true, subject: true, jobId: true, reservedAt: true },
    });
    return reserve;
  });
}

/**
 * Proof that the generation holding `reserve` is alive. False when the reserve is gone (the
 * sweeper took it): the generation goes on — the provider cannot be cancelled — and its release
 * will be a late one.
 */
export async function heartbeatReserve(reserve: Pick<Reserve, "id">, now: Date = new Date()): Promise<boolean> {
  const { count } = await db().quotaReserve.updateMany({ where: { id: reserve.id }, data: { heartbeatAt: now } });
  return count > 0;
}

export interface ReleaseOptions {
  /** @defaultValue the current time */
  now?: Date;
  /** Written with the charge of a success (the delivered image); a throw undoes the whole release. */
  effect?: ReleaseEffect;
  /** Longest the transaction may run (real milliseconds). @defaultValue the client's (30 s) */
  timeoutMs?: number;
}

/** What the release's transaction decided, and when the sweeper took the reserve back (a late release). */
type Released = { result: ReleaseResult; reclaimedAt?: Date };

/** One release, as its transaction sees it. */
interface Ending {
  tx: Prisma.TransactionClient;
  reserve: Reserve;
  outcome: ReleaseOutcome;
  now: Date;
  effect: ReleaseEffect | undefined;
}

/** Ends a reserve still held (inside the release's transaction): a spend and its effect, or the unit back in the pack. */
async function endHeld({ tx, reserve, outcome, now, effect }: Ending): Promise<Released> {
  if (outcome === "succeeded") {
    await tx.quotaSpend.create({ data: spendOf(reserve, now, false), select: { id: true } });
    await effect?.(tx);
  } else {
    await tx.quotaPack.update({
      where: { id: reserve.packId },
      data: { remaining: { increment: 1 } },
      select: { id: true },
    });
  }
  await undoKindEffects(tx, reserve);
  return { result: { type: outcome === "succeeded" ? "spent" : "refunded" } };
}

/** Ends a reserve already gone (inside the release's transaction): a late release recorded once, or nothing. */
async function endGone({ tx, reserve, outcome, now, effect }: Ending): Promise<Released> {
  // Gone: taken back by the sweeper, or released before.
  const reclaim = await tx.reserveReclaim.findUnique({
    where: { reserveId: reserve.id },
    select: { reclaimedAt: true },
  });
  const before = await tx.lateRelease.count({ where: { reserveId: reserve.id } });
  if (!reclaim || before > 0) return { result: { type: "already_released" } };
  let resolution: "charged" | "debt" | "none" = "none";
  if (outcome === "succeeded") {
    // The generation was delivered: charge it, even though the sweeper refunded its unit.
    const charged = await tx.quotaPack.updateMany({
      where: { id: reserve.packId, remaining: { gt: 0 } },
      data: { remaining: { decrement: 1 } },
    });
    resolution = charged.count === 1 ? "charged" : "debt";
    if (resolution === "charged")
      await tx.quotaSpend.create({ data: spendOf(reserve, now, true), select: { id: true } });
    await effect?.(tx);
  }
  // The sweeper already undid the kind's effects; a newer dislike of the same ad may hold the
  // flag now, so it is left alone.
  await tx.lateRelease.create({
    data: { ...reserveColumns(reserve), outcome, resolution, reclaimedAt: reclaim.reclaimedAt, releasedAt: now },
    select: { id: true },
  });
  return { result: { type: "late", resolution }, reclaimedAt: reclaim.reclaimedAt };
}

/** Reports a release once committed: the reserve's age, or a late or repeated release as a warning (and a count). */
function reportRelease(reserve: Reserve, outcome: ReleaseOutcome, now: Date, { result, reclaimedAt }: Released): void {
  const ageMs = now.getTime() - reserve.reservedAt.getTime();
  if (result.type === "spent" || result.type === "refunded") {
    metrics.observeReserveAge({ kind: reserve.kind, end: result.type }, productionSeconds(ageMs));
  } else if (result.type === "late") {
    metrics.reserveLateReleases.inc({ kind: reserve.kind, resolution: result.resolution });
    log.warn(
      {
        reserveId: reserve.id,
        packId: reserve.packId,
        tenantId: reserve.tenantId,
        kind: reserve.kind,
        adId: reserve.subject,
        jobId: reserve.jobId,
        outcome,
        resolution: result.resolution,
        ageMs,
        reclaimedAgoMs: reclaimedAt ? now.getTime() - reclaimedAt.getTime() : null,
      },
      `late release: the sweeper had taken back this reserve while its generation was still running (${outcome}); ${
        result.resolution === "charged"
          ? "charged again"
          : result.resolution === "debt"
            ? "the pack is empty: recorded as a debt"
            : "nothing to charge"
      }`,
    );
  } else {
    log.warn(
      { reserveId: reserve.id, kind: reserve.kind, outcome },
      "release of a reserve that was already released: nothing changed",
    );
  }
}

/**
 * Ends a reserve, in one transaction. Succeeded: one spend is recorded (and `effect`, the
 * delivered image, written with it). Failed: the unit goes back to the pack. A `dislike`
 * reserve clears the ad's flag whatever the outcome.
 *
 * A reserve the sweeper already took back is a late release, and never passes silently: a
 * success is charged again (a debt when the pack is empty, settled by the next `grantPack`), its
 * image still written; a failure changes nothing (the sweeper refunded it). Either way one
 * LateRelease row, a warning with ids and ages, and `bounded_reserve_late_releases_total`.
 */
export async function release(
  reserve: Reserve,
  outcome: ReleaseOutcome,
  options: ReleaseOptions = {},
): Promise<ReleaseResult> {
  const now = options.now ?? new Date();
  const released = await db().$transaction(
    async (tx): Promise<Released> => {
      const { count } = await tx.quotaReserve.deleteMany({ where: { id: reserve.id } });
      const ending = { tx, reserve, outcome, now, effect: options.effect };
      return count === 1 ? endHeld(ending) : endGone(ending);
    },
    options.timeoutMs === undefined ? undefined : { timeout: options.timeoutMs },
  );
  reportRelease(reserve, outcome, now, released);
  return released.result;
}

/** What a spend and a late release copy of their reserve, so either can be traced back to it. */
function reserveColumns(reserve: Reserve) {
  return {
    reserveId: reserve.id,
    packId: reserve.packId,
    tenantId: reserve.tenantId,
    kind: reserve.kind,
    subject: reserve.subject,
    jobId: reserve.jobId,
    reservedAt: reserve.reservedAt,
  };
}

function spendOf(reserve: Reserve, now: Date, late: boolean) {
  return { ...reserveColumns(reserve), spentAt: now, late };
}

/**
 * Adds `units` to the tenant's pack (creating it), then charges open debts against them, oldest
 * first: each settled debt becomes a spend. Returns the pack's id and the debts settled.
 */
export async function grantPack(
  tenantId: string,
  units: number,
  now: Date = new Date(),
  client?: Prisma.TransactionClient,
): Promise<{ packId: string; settled: number }> {
  if (!Number.isInteger(units) || units < 0) throw new RangeError(`units must be a whole number ≥ 0, got ${units}`);
  // Inside the caller's transaction when given one (a grant that also creates the tenant).
  const inTransaction = <T>(run: (tx: Prisma.TransactionClient) => Promise<T>) =>
    client ? run(client) : db().$transaction(run);
  return inTransaction(async (tx) => {
    const rows = await tx.$queryRaw<{ id: string }[]>`
      INSERT INTO "QuotaPack" (id, "tenantId", size, remaining, "updatedAt")
      VALUES (gen_random_uuid(), ${tenantId}::uuid, ${units}, ${units}, now() AT TIME ZONE 'UTC')
      ON CONFLICT ("tenantId") DO UPDATE SET size = "QuotaPack".size + EXCLUDED.size, remaining = "QuotaPack".remaining + EXCLUDED.remaining, "updatedAt" = EXCLUDED."updatedAt"
      RETURNING id::text AS id`;
    const packId = rows[0]!.id;
    const debts = await tx.lateRelease.findMany({
      where: { packId, resolution: "debt", debtSettledAt: null },
      orderBy: { releasedAt: "asc" },
      select: { id: true, reserveId: true, tenantId: true, kind: true, subject: true, jobId: true, reservedAt: true },
    });
    let settled = 0;
    for (const d of debts) {
      const { count } = await tx.quotaPack.updateMany({
        where: { id: packId, remaining: { gt: 0 } },
        data: { remaining: { decrement: 1 } },
      });
      if (count === 0) break;
      await tx.quotaSpend.create({
        data: spendOf(
          {
            id: d.reserveId,
            packId,
            tenantId: d.tenantId,
            kind: d.kind,
            subject: d.subject,
            jobId: d.jobId,
            reservedAt: d.reservedAt,
          },
          now,
          true,
        ),
        select: { id: true },
      });
      await tx.lateRelease.update({ where: { id: d.id }, data: { debtSettledAt: now }, select: { id: true } });
      settled++;
    }
    return { packId, settled };
  });
}
