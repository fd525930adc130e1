import { z } from "zod";
import { db } from "@/lib/db/client";
import { tenantSlugSchema } from "@/lib/tenants/slug";
import { logger } from "@/lib/log";
import { ensureTenant } from "@/lib/tenants/ensure-tenant";
import { grantPack } from "./reserves";
import { formatCount } from "@/lib/format/number";

const log = logger("quota");

/** The most one grant adds: a typo of a few zeros is refused rather than given away. */
const MAX_GRANT_UNITS = 100_000;

/** `POST /api/packs` and `npm run packs -- grant`: what an operator gives a tenant. */
export const packGrantSchema = z
  .object({
    tenant: tenantSlugSchema,
    units: z
      .number({ error: "units must be a whole number" })
      .int("units must be a whole number")
      .min(1, "units must be at least 1")
      .max(MAX_GRANT_UNITS, `units must be at most ${formatCount(MAX_GRANT_UNITS)}`),
  })
  .strict();

/** A tenant's pack as people read it. */
export interface PackState {
  tenant: string;
  /** Every unit ever granted. */
  size: number;
  /** Units free to claim now. */
  remaining: number;
  /** Units held by running generations. */
  live: number;
  /** Generations charged. */
  spent: number;
  /** Generations delivered after their reserve was swept while the pack was empty, not yet charged. */
  openDebts: number;
}

export interface GrantResult extends PackState {
  granted: number;
  /** Open debts charged to the granted units (oldest first). */
  debtsSettled: number;
}

async function stateOf(tenant: string, tenantId: string): Promise<PackState | null> {
  const pack = await db().quotaPack.findUnique({
    where: { tenantId },
    select: { id: true, size: true, remaining: true },
  });
  if (!pack) return null;
  const [live, spent, openDebts] = await Promise.all([
    db().quotaReserve.count({ where: { packId: pack.id } }),
    db().quotaSpend.count({ where: { packId: pack.id } }),
    db().lateRelease.count({ where: { packId: pack.id, resolution: "debt", debtSettledAt: null } }),
  ]);
  return { tenant, size: pack.size, remaining: pack.remaining, live, spent, openDebts };
}

/**
 * Gives a tenant `units` more image generations: the tenant and its pack are created on the
 * first grant; open debts (late successes charged while the pack was empty) are paid from the
 * new units first. The one function behind `POST /api/packs` and `npm run packs -- grant`.
 */
export async function grantUnits(input: unknown): Promise<GrantResult> {
  const { tenant, units } = packGrantSchema.parse(input);
  // One transaction: a grant that fails leaves no new tenant behind.
  const { tenantId, settled } = await db().$transaction(async (tx) => {
    const id = await ensureTenant(tenant, tx);
    return { tenantId: id, ...(await grantPack(id, units, new Date(), tx)) };
  });
  const state = (await stateOf(tenant, tenantId))!;
  log.info(
    { tenant, tenantId, units, debtsSettled: settled, size: state.size, remaining: state.remaining },
    "granted image generation units",
  );
  return { ...state, granted: units, debtsSettled: settled };
}

/** The tenant's pack, or null when the tenant has none (or does not exist). */
export async function getPack(tenant: string): Promise<PackState | null> {
  const slug = tenantSlugSchema.parse(tenant);
  const row = await db().tenant.findUnique({ where: { slug }, select: { id: true } });
  return row ? stateOf(slug, row.id) : null;
}
