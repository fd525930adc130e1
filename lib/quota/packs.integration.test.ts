import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { closeDb, db } from "@/lib/db/client";
import { deleteTenant, uniqueTenantSlug } from "@/test/helpers/tenants";
import { claim, release } from "./reserves";
import { sweepReserves } from "./sweep";
import { getPack, grantUnits } from "./packs";
import { books, dropQuotaTenants, quotaTenant } from "./test-fixtures";

const slugs: string[] = [];
const fresh = (label: string) => {
  const slug = uniqueTenantSlug(label);
  slugs.push(slug);
  return slug;
};

afterAll(async () => {
  await dropQuotaTenants();
  for (const slug of slugs) {
    const t = await db().tenant.findUnique({ where: { slug }, select: { id: true } });
    if (t) await db().quotaPack.deleteMany({ where: { tenantId: t.id } });
    await deleteTenant(slug);
  }
  await closeDb();
});

async function zodPaths(input: unknown): Promise<string[]> {
  const err = await grantUnits(input).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(z.ZodError);
  return (err as z.ZodError).issues.map((i) => i.path.join("."));
}

describe("grantUnits: what POST /api/packs and `npm run packs -- grant` do", () => {
  it("creates the tenant and its pack on the first grant, and adds to it on the next", async () => {
    const tenant = fresh("packs-new");
    expect(await getPack(tenant)).toBeNull();
    expect(await grantUnits({ tenant, units: 5 })).toEqual({
      tenant,
      granted: 5,
      size: 5,
      remaining: 5,
      live: 0,
      spent: 0,
      openDebts: 0,
      debtsSettled: 0,
    });
    expect(await grantUnits({ tenant: ` ${tenant.toUpperCase()} `, units: 3 })).toMatchObject({
      tenant,
      size: 8,
      remaining: 8,
    });
    expect(await getPack(tenant)).toEqual({ tenant, size: 8, remaining: 8, live: 0, spent: 0, openDebts: 0 });
  });

  it("pays open debts from the new units first, oldest first", async () => {
    const t = await quotaTenant("packs-debt", 1);
    const tenant = (await db().tenant.findUniqueOrThrow({ where: { id: t.tenantId }, select: { slug: true } })).slug;
    const now = Date.now();
    // A generation whose reserve was swept, then a second that emptied the pack, then the first delivered: a debt.
    const first = await claim({
      tenantId: t.tenantId,
      kind: "generate",
      subject: t.adIds[0]!,
      now: new Date(now - 3_600_000),
    });
    await sweepReserves({ now: new Date(now), windowMs: 60_000, leaseMs: 60_000, tenantId: t.tenantId });
    const second = await claim({ tenantId: t.tenantId, kind: "generate", subject: t.adIds[0]! });
    expect(await release(first, "succeeded")).toEqual({ type: "late", resolution: "debt" });
    expect(await getPack(tenant)).toMatchObject({ size: 1, remaining: 0, live: 1, spent: 0, openDebts: 1 });

    expect(await grantUnits({ tenant, units: 2 })).toMatchObject({
      granted: 2,
      size: 3,
      remaining: 1,
      live: 1,
      spent: 1,
      openDebts: 0,
      debtsSettled: 1,
    });
    await release(second, "succeeded");
    expect(await books(t.packId)).toMatchObject({ size: 3, remaining: 1, spent: 2, live: 0, debts: 0 });
  });

  it("refuses bad input with a zod error, and creates nothing", async () => {
    const tenant = fresh("packs-bad");
    expect(await zodPaths({ tenant, units: 0 })).toEqual(["units"]);
    expect(await zodPaths({ tenant, units: 100_001 })).toEqual(["units"]);
    expect(await zodPaths({ tenant, units: 2.5 })).toEqual(["units"]);
    expect(await zodPaths({ tenant, units: "10" })).toEqual(["units"]);
    expect(await zodPaths({ tenant: "Not a tenant!", units: 1 })).toEqual(["tenant"]);
    expect(await zodPaths({ tenant: "system", units: 1 })).toEqual(["tenant"]);
    expect(await zodPaths({ units: 1 })).toEqual(["tenant"]);
    expect(await zodPaths({ tenant, units: 1, size: 9 })).toEqual([""]);
    expect(await zodPaths(null)).toEqual([""]);
    expect(await db().tenant.findUnique({ where: { slug: tenant } })).toBeNull();
  });

  it("accepts the bounds: 1 and 100,000 units", async () => {
    const tenant = fresh("packs-bounds");
    await grantUnits({ tenant, units: 1 });
    expect(await grantUnits({ tenant, units: 100_000 })).toMatchObject({ size: 100_001, remaining: 100_001 });
  });
});
