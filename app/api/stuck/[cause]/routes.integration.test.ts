import { randomBytes } from "node:crypto";
import { afterAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { Principal } from "@/lib/auth/roles";

// The caller of "this request", as the auth code would find it.
const caller = vi.hoisted(() => ({ principal: null as Principal | null }));
vi.mock("@/lib/auth/principal", async () => {
  const { Forbidden, Unauthenticated } = await import("@/lib/auth/errors");
  const { hasRole } = await import("@/lib/auth/roles");
  return {
    currentPrincipal: async () => caller.principal,
    requireRole: async (role: "viewer" | "operator") => {
      if (!caller.principal) throw new Unauthenticated();
      if (!hasRole(caller.principal, role)) throw new Forbidden(`This needs the ${role} role; you are signed in as ${caller.principal.role}.`);
      return caller.principal;
    },
  };
});
vi.mock("next/headers", () => ({ headers: async () => new Headers({ "x-forwarded-for": "203.0.113.7" }) }));

const { closeDb, db } = await import("@/lib/db/client");
const { closeQueues } = await import("@/lib/queues/queues");
const { closeRedis } = await import("@/lib/redis/client");
const fail = await import("./fail/route");
const retry = await import("./retry/route");
const list = await import("../route");

const operator: Principal = { userId: "u-stuck-op", username: `stuck-op-${randomBytes(3).toString("hex")}`, role: "operator", via: "token" };
const viewer: Principal = { userId: "u-stuck-view", username: "stuck-viewer", role: "viewer", via: "token" };

beforeEach(() => {
  caller.principal = operator;
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

const call = (handler: typeof fail.POST, cause: string, body: string | null) =>
  handler(new Request(`http://localhost/api/stuck/${cause}/x`, { method: "POST", body, headers: body === null ? {} : { "content-type": "application/json" } }), {
    params: Promise.resolve({ cause }),
  });

describe("POST /api/stuck/:cause/fail and /retry", () => {
  it("an empty body or an empty selection is a 400 that says so, and is audited as refused", async () => {
    for (const [handler, cause, body] of [
      [fail.POST, "late_start", null],
      [fail.POST, "late_start", "{}"],
      [fail.POST, "lost_from_queue", '{ "jobIds": [] }'],
      [retry.POST, "reaped", null],
    ] as const) {
      const res = await call(handler, cause, body);
      expect(res.status).toBe(400);
      const json = (await res.json()) as { error: { code: string; message: string } };
      expect(json.error.code).toBe("empty_selection");
      expect(json.error.message).toMatch(/^No job selected: nothing was done\./);
    }
    const audit = await db().auditEntry.findMany({ where: { actor: operator.username }, select: { action: true, result: true, target: true } });
    expect(audit).toHaveLength(4);
    expect(audit.every((a) => a.result === "refused" && a.action.startsWith("stuck."))).toBe(true);
  });

  it("refuses a viewer (403), an unknown group (404) and ids that are not job ids (422)", async () => {
    caller.principal = viewer;
    expect((await call(fail.POST, "late_start", '{ "jobIds": ["00000000-0000-4000-8000-000000000000"] }')).status).toBe(403);
    caller.principal = operator;
    expect((await call(fail.POST, "everything", '{ "jobIds": ["00000000-0000-4000-8000-000000000000"] }')).status).toBe(404);
    const bad = await call(fail.POST, "late_start", '{ "jobIds": ["nope"] }');
    expect(bad.status).toBe(422);
  });
});

describe("GET /api/stuck", () => {
  it("gives a viewer what the page shows: every group with its count, and the reaper's own count", async () => {
    caller.principal = viewer;
    const res = await list.GET(new Request("http://localhost/api/stuck?late_start=2"), undefined as never);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { groups: { cause: string; count: number; page: number }[]; reaper: { finalised: number } };
    expect(body.groups.map((g) => g.cause)).toEqual(["lost_from_queue", "over_hard_limit", "heartbeat_lost", "late_start", "reaped"]);
    expect(typeof body.reaper.finalised).toBe("number");
    caller.principal = null;
    expect((await list.GET(new Request("http://localhost/api/stuck"), undefined as never)).status).toBe(401);
  });
});
