import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import type { APIRequestContext } from "@playwright/test";
import { ACTION_ACCESS, ROUTE_ACCESS, type Access } from "../app/api/access-rules";
import { sql } from "./db";
import { BASE_URL, E2E_ENV } from "./env";
import { expect, test, users } from "./fixtures";

type Caller = "anonymous" | "viewer" | "operator" | "revoked";
let tokens: Record<Exclude<Caller, "anonymous">, string>;

test.beforeAll(() => {
  users("add", "authz-viewer", "--role", "viewer", "--password", "authz-viewer-password");
  users("add", "authz-revoked", "--role", "operator", "--password", "authz-revoked-password");
  const token = (name: string) => users("token", name).trim().split("\n").pop()!;
  tokens = {
    viewer: token("authz-viewer"),
    operator: E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN,
    revoked: token("authz-revoked"),
  };
  users("revoke", "authz-revoked");
});

/** Bodies that exercise a route without changing anything (the default is `{}`). */
const SAFE_BODY: Record<string, unknown> = {
  "POST /api/jobs/retry": { filter: {}, dryRun: true },
  // A dislike of an ad nobody has: refused (404) with nothing created.
  "POST /api/generations": { tenant: "authz-probe", adId: "00000000-0000-4000-8000-000000000000", kind: "dislike" },
  // No units: refused (422) before anything is granted.
  "POST /api/packs": { tenant: "authz-probe", units: 0 },
};

function call(request: APIRequestContext, rule: string, caller: Caller) {
  const [method, pattern] = rule.split(" ") as [string, string];
  const path = pattern
    .replace("[id]", randomUUID())
    .replace("[token]", "0".repeat(32))
    .replace("[tenant]", "authz-probe");
  const headers: Record<string, string> = caller === "anonymous" ? {} : { authorization: `Bearer ${tokens[caller]}` };
  return method === "GET"
    ? request.get(path, { headers })
    : request.fetch(path, { method, headers, data: SAFE_BODY[rule] ?? {} });
}

/** What each caller must get for each access level: refused with 401/403, or let through (any other answer). */
const EXPECTED: Record<Access, Record<Caller, 401 | 403 | "allowed">> = {
  public: { anonymous: "allowed", viewer: "allowed", operator: "allowed", revoked: "allowed" },
  viewer: { anonymous: 401, viewer: "allowed", operator: "allowed", revoked: 401 },
  operator: { anonymous: 401, viewer: 403, operator: "allowed", revoked: 401 },
};

/** Probes whose 503 is an answer (not ready: a worker still starting), not a failure. */
const MAY_ANSWER_503 = new Set(["GET /api/readyz"]);

for (const [rule, access] of Object.entries(ROUTE_ACCESS)) {
  test(`${rule} (${access}) × anonymous, viewer, operator, a revoked token`, async ({ request }) => {
    for (const caller of ["anonymous", "viewer", "operator", "revoked"] as const) {
      const response = await call(request, rule, caller);
      const expected = EXPECTED[access][caller];
      if (expected === "allowed")
        expect([401, 403], `${caller} → ${response.status()}`).not.toContain(response.status());
      else expect(response.status(), `${caller}`).toBe(expected);
      if (!(MAY_ANSWER_503.has(rule) && response.status() === 503))
        expect(response.status(), `${caller}: never a 500`).toBeLessThan(500);
    }
  });
}

test("operator server actions refuse anonymous callers on the server and record the refusal", async ({ request }) => {
  const manifest = JSON.parse(readFileSync(".next/server/server-reference-manifest.json", "utf8")) as {
    node: Record<string, { filename: string; exportedName: string }>;
  };
  const ids = Object.fromEntries(
    Object.entries(manifest.node).map(([id, a]) => [`${a.filename}#${a.exportedName}`, id]),
  );
  for (const [action, access] of Object.entries(ACTION_ACCESS)) {
    expect(ids[action], `${action} is built`).toBeTruthy();
    if (access !== "operator") continue;
    const refusals = async () =>
      Number(
        (
          await sql<{ n: string }>(
            `select count(*) n from "AuditEntry" where actor = 'anonymous' and result = 'refused' and message = 'refused: not signed in'`,
          )
        )[0]!.n,
      );
    const before = await refusals();
    // What a form post sends, without the page and without a session: the action's id and arguments.
    // Posted to the page the action belongs to: app/(ops)/jobs/[id]/actions.ts → /jobs/<id>.
    const page =
      action
        .split("#")[0]!
        .replace(/^app/, "")
        .replace(/\/\([^)]+\)/g, "")
        .replace(/\/actions\.ts$/, "")
        .replace("[id]", randomUUID()) || "/";
    const response = await request.post(page, {
      headers: { "next-action": ids[action]!, origin: BASE_URL },
      multipart: { "0": '[{},"$K1"]', "1_jobId": randomUUID(), "1_budgetSoftS": "" },
    });
    expect(response.status()).toBeLessThan(500);
    expect(await response.text(), `${action}: the action answered with the refusal`).toContain(
      "Sign in, or send an API token",
    );
    expect(await refusals(), `${action}: the refusal is audited`).toBe(before + 1);
  }
});
