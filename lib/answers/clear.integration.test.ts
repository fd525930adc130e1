import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Principal } from "@/lib/auth/roles";

// The caller of "this request", as the auth code would find it; the web process's peer address.
const caller = vi.hoisted(() => ({ principal: null as Principal | null }));
vi.mock("@/lib/auth/principal", async () => {
  const { Forbidden, Unauthenticated } = await import("@/lib/auth/errors");
  const { hasRole } = await import("@/lib/auth/roles");
  return {
    currentPrincipal: async () => caller.principal,
    requireRole: async (role: "viewer" | "operator") => {
      if (!caller.principal) throw new Unauthenticated();
      if (!hasRole(caller.principal, role))
        throw new Forbidden(`This needs the ${role} role; you are signed in as ${caller.principal.role}.`);
      return caller.principal;
    },
  };
});
vi.mock("next/headers", () => ({ headers: async () => new Headers({ "x-bounded-peer-address": "203.0.113.7" }) }));
vi.mock("next/cache", () => ({ revalidatePath: () => {} }));

const { closeDb, db } = await import("@/lib/db/client");
const { ensureTenant } = await import("@/lib/tenants/ensure-tenant");
const { deleteTenant, uniqueTenantSlug } = await import("@/test/helpers/tenants");
const { CATEGORY_PROMPT_VERSION } = await import("@/lib/modelcalls/choose-category");
(await import("@/lib/security/peer-address")).installPeerAddressStamp();
const { DELETE } = await import("@/app/api/tenants/[tenant]/category-answers/route");
const { clearCategoryAnswersAction } = await import("@/app/(ops)/model-calls/actions");
const { answerFromCache, rememberAnswer } = await import("./store");

/**
 * Clearing a tenant's stored category answers: the API route and the /model-calls form call the
 * same lib function, for operators only (checked on the server), each call audited.
 */

const operator: Principal = { userId: "u-op", username: "op-answers", role: "operator", via: "token" };
const viewer: Principal = { userId: "u-view", username: "viewer-answers", role: "viewer", via: "token" };

const tenants: string[] = [];
let slug = "";
let tenantId = "";
let other = "";

const KEYS = ["a", "b"].map((c) => c.repeat(64));

async function remember(id: string, key: string) {
  await rememberAnswer({
    tenantId: id,
    key,
    slug: "groceries",
    model: "bounded-sim-1",
    promptVersion: CATEGORY_PROMPT_VERSION,
    promptTokens: 80,
    completionTokens: 3,
    callShare: 0.125,
  });
}

beforeEach(async () => {
  caller.principal = operator;
  slug = uniqueTenantSlug("clear");
  const otherSlug = uniqueTenantSlug("keep");
  tenants.push(slug, otherSlug);
  tenantId = await ensureTenant(slug);
  other = await ensureTenant(otherSlug);
  for (const key of KEYS) await remember(tenantId, key);
  await remember(other, KEYS[0]!);
});

afterEach(async () => {
  for (const s of tenants.splice(0)) await deleteTenant(s);
});

afterAll(async () => {
  await closeDb();
});

const del = (tenant: string) =>
  DELETE(
    new Request(`http://localhost/api/tenants/${encodeURIComponent(tenant)}/category-answers`, { method: "DELETE" }),
    {
      params: Promise.resolve({ tenant }),
    },
  );

const stored = (id: string) => db().categoryAnswer.count({ where: { tenantId: id } });
const audit = (target: string) =>
  db().auditEntry.findMany({
    where: { action: "category_answers.clear", target },
    select: { actor: true, result: true, message: true },
    orderBy: { id: "asc" },
  });

describe("DELETE /api/tenants/:tenant/category-answers", () => {
  it("an operator clears the tenant's answers (and no other tenant's): its next rows miss", async () => {
    const response = await del(slug);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ tenant: slug, removed: 2 });
    expect(await stored(tenantId)).toBe(0);
    expect(await answerFromCache(tenantId, KEYS[0]!)).toBeNull();
    expect(await stored(other)).toBe(1);
    expect(await audit(slug)).toEqual([
      {
        actor: "op-answers",
        result: "ok",
        message: `Cleared 2 stored category answers of ${slug}; its next imports ask the model again.`,
      },
    ]);
  });

  it("refuses a viewer with 403 and clears nothing", async () => {
    caller.principal = viewer;
    const response = await del(slug);
    expect(response.status).toBe(403);
    expect(await stored(tenantId)).toBe(2);
    expect(await audit(slug)).toMatchObject([{ actor: "viewer-answers", result: "refused" }]);
  });

  it("answers 404 for a tenant that does not exist and 422 for a malformed name, clearing nothing", async () => {
    const missing = uniqueTenantSlug("missing");
    const notFound = await del(missing);
    expect(notFound.status).toBe(404);
    expect((await notFound.json()).error.code).toBe("not_found");
    const bad = await del("Not A Tenant!");
    expect(bad.status).toBe(422);
    expect((await bad.json()).error.code).toBe("invalid_tenant");
    expect(await stored(tenantId)).toBe(2);
    expect(await audit(missing)).toMatchObject([{ result: "refused" }]);
  });
});

describe("the /model-calls form", () => {
  const form = (tenant: string) => {
    const f = new FormData();
    f.set("tenant", tenant);
    return f;
  };

  it("clears through the same lib function for an operator, and refuses a viewer", async () => {
    caller.principal = viewer;
    const refused = await clearCategoryAnswersAction({}, form(slug));
    expect(refused.ok).toBe(false);
    expect(await stored(tenantId)).toBe(2);

    caller.principal = operator;
    const done = await clearCategoryAnswersAction({}, form(slug));
    expect(done).toMatchObject({ ok: true, message: expect.stringContaining("Cleared 2 stored category answers") });
    expect(await stored(tenantId)).toBe(0);
    expect((await audit(slug)).map((e) => e.result)).toEqual(["refused", "ok"]);
  });
});
