import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import type { APIRequestContext } from "@playwright/test";
import { sql as sqlOn } from "./db";
import { TIGHT_ENV, TIGHT_URL } from "./env";
import { expect, test } from "./fixtures";

// The system at time scale 1/50: a generation's real timeouts (a 150 s poll attempt is 3 s here)
// stay far above an HTTP round trip, as in production. At 1/2000 they are tens of milliseconds
// and generations end timed out.
test.use({ baseURL: TIGHT_URL });
const sql = <T extends Record<string, unknown>>(text: string, params: unknown[] = []) =>
  sqlOn<T>(text, params, TIGHT_ENV.DATABASE_URL);
const operator = { authorization: `Bearer ${TIGHT_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
const TERMINAL = ["completed", "completed_with_errors", "timed_out", "killed", "failed", "abandoned", "cancelled"];

const packs = (...args: string[]) =>
  execFileSync(process.execPath, ["--import", "tsx", "scripts/packs.ts", ...args], {
    env: { ...process.env, ...TIGHT_ENV },
  }).toString();

async function generate(request: APIRequestContext, tenant: string, adId: string, kind: "generate" | "dislike") {
  const response = await request.post("/api/generations", { headers: operator, data: { tenant, adId, kind } });
  expect(response.status(), await response.text()).toBe(201);
  return ((await response.json()) as { jobId: string }).jobId;
}

/**
 * Waits until every job has ended for good; returns their statuses. A generation whose poll timed
 * out ends `failed` for an outside service, and the platform resumes it by itself a moment later
 * (lib/diagnosis/resume-policy.ts): its customer page says so, and until that resume has run it is not
 * over — it may still spend a unit.
 */
async function ended(request: APIRequestContext, jobIds: string[]): Promise<Record<string, string>> {
  let rows: { id: string; status: string; token: string }[] = [];
  await expect
    .poll(
      async () => {
        rows = await sql<{ id: string; status: string; token: string }>(
          `select id::text, status::text, "progressToken" token from "Job" where id = any($1::uuid[])`,
          [jobIds],
        );
        if (rows.length !== jobIds.length || !rows.every((r) => TERMINAL.includes(r.status))) return false;
        for (const r of rows.filter((r) => r.status === "failed")) {
          const progress = (await (await request.get(`/api/progress/${r.token}`)).json()) as { next: string | null };
          if (progress.next?.includes("It continues by itself")) return false;
        }
        return true;
      },
      { timeout: 90_000 },
    )
    .toBe(true);
  return Object.fromEntries(rows.map((r) => [r.id, r.status]));
}

async function packOf(tenant: string) {
  const [row] = await sql<{ size: number; remaining: number; spent: string; live: string }>(
    `select p.size, p.remaining,
       (select count(*) from "QuotaSpend" s where s."packId" = p.id) spent,
       (select count(*) from "QuotaReserve" r where r."packId" = p.id) live
     from "QuotaPack" p join "Tenant" t on t.id = p."tenantId" where t.slug = $1`,
    [tenant],
  );
  return row ? { size: row.size, remaining: row.remaining, spent: Number(row.spent), live: Number(row.live) } : null;
}

test("an operator grants a pack, generations spend it (a dislike included), and /reserves shows the policy arithmetic and the pack's books", async ({
  page,
  request,
  signIn,
}) => {
  const tenant = "e2e-reserves";

  // Bad grants: a clear 4xx, nothing created.
  const notJson = await request.post("/api/packs", {
    headers: { ...operator, "content-type": "application/json" },
    data: Buffer.from("{units: 5"),
  });
  expect(notJson.status()).toBe(400);
  const tooMany = await request.post("/api/packs", { headers: operator, data: { tenant, units: 100_001 } });
  expect(tooMany.status()).toBe(422);
  expect((await tooMany.json()).error.issues).toEqual([{ path: "units", message: "units must be at most 100,000" }]);
  const extra = await request.post("/api/packs", { headers: operator, data: { tenant, units: 5, size: 5 } });
  expect(extra.status()).toBe(422);
  expect(await sql(`select 1 from "Tenant" where slug = $1`, [tenant])).toEqual([]);

  const granted = await request.post("/api/packs", { headers: operator, data: { tenant, units: 5 } });
  expect(granted.status()).toBe(201);
  expect(await granted.json()).toEqual({
    tenant,
    granted: 5,
    size: 5,
    remaining: 5,
    live: 0,
    spent: 0,
    openDebts: 0,
    debtsSettled: 0,
  });
  const audit = await sql<{ actor: string; result: string }>(
    `select actor, result::text from "AuditEntry" where action = 'pack.grant' and target = $1 order by id`,
    [tenant],
  );
  expect(audit).toEqual([{ actor: "admin", result: "ok" }]);

  // Three cards, then a dislike of one that was delivered.
  const ads = [randomUUID(), randomUUID(), randomUUID()];
  const first = await Promise.all(ads.map((ad) => generate(request, tenant, ad, "generate")));
  const statuses = await ended(request, first);
  const delivered = ads.filter((_, i) => statuses[first[i]!] === "completed");
  expect(delivered.length, JSON.stringify(statuses)).toBeGreaterThan(0);
  const dislike = await generate(request, tenant, delivered[0]!, "dislike");
  const all = { ...statuses, ...(await ended(request, [dislike])) };
  const completed = Object.values(all).filter((s) => s === "completed").length;

  // Every unit is back in the pack or charged once; none is left held.
  expect(await packOf(tenant)).toEqual({ size: 5, remaining: 5 - completed, spent: completed, live: 0 });
  const [flag] = await sql<{ used: boolean | null }>(
    `select (params->>'aiDislikeRetryUsed')::boolean used from "Ad" where id = $1`,
    [delivered[0]],
  );
  expect(flag!.used ?? false).toBe(false);
  expect(packs("show", tenant)).toContain(
    `${tenant}: ${5 - completed} of 5 units remaining, 0 held by running generations, ${completed} spent, 0 open debt(s)`,
  );

  await signIn("operator");
  await page.goto("/reserves");
  await expect(page.getByRole("heading", { name: "Reserves", level: 1 })).toBeVisible();
  const policy = page.getByTestId("policy-table");
  await expect(policy.locator('[data-stat="worst-case"]')).toHaveText("960 s");
  await expect(policy).toContainText("16 min");
  await expect(policy).toContainText("× margin 1.5");
  await expect(policy).toContainText("1,440 s");
  await expect(policy.locator('[data-stat="window"]')).toHaveText("1,500 s");
  await expect(policy).toContainText("25 min");
  await expect(policy).toContainText("60 s to spare");
  await expect(page.getByTestId("policy-problem")).toHaveCount(0);

  const row = page.getByTestId("packs-table").locator(`tr[data-tenant="${tenant}"]`);
  await expect(row.locator('[data-stat="remaining"]')).toHaveText(String(5 - completed));
  await expect(row.locator('[data-stat="spent"]')).toHaveText(String(completed));
  await expect(row.locator('[data-stat="running"]')).toHaveText("0");
  await expect(page.getByTestId("headlines").locator('[data-stat="window-vs-needed"]')).toHaveText("25 min ≥ 24 min");
  await expect(page.getByTestId("headlines")).toContainText("worst case 16 min (960 s); 60 s to spare");
  await expect(page.getByTestId("live-summary").locator('[data-stat="live"]')).toHaveText("0 units");
  await expect(page.getByTestId("late-empty")).toBeVisible();
  await page.screenshot({ path: "test-results/reserves.png", fullPage: true });
});

test("an empty pack refuses a generation with 409 and the reason, and nothing is created", async ({ request }) => {
  const tenant = "e2e-reserves-empty";
  const granted = await request.post("/api/packs", { headers: operator, data: { tenant, units: 1 } });
  expect(granted.status()).toBe(201);
  // Spend the one unit (a provider failure refunds it: try again).
  for (let i = 0; i < 3 && (await packOf(tenant))!.spent === 0; i++)
    await ended(request, [await generate(request, tenant, randomUUID(), "generate")]);
  expect(await packOf(tenant)).toEqual({ size: 1, remaining: 0, spent: 1, live: 0 });

  const jobsBefore = await sql<{ n: string }>(
    `select count(*) n from "Job" j join "Tenant" t on t.id = j."tenantId" where t.slug = $1`,
    [tenant],
  );
  const adId = randomUUID();
  const refused = await request.post("/api/generations", {
    headers: operator,
    data: { tenant, adId, kind: "generate" },
  });
  expect(refused.status()).toBe(409);
  const body = (await refused.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("pack_empty");
  expect(body.error.message).toMatch(/pack is used up/);
  expect(
    await sql<{ n: string }>(
      `select count(*) n from "Job" j join "Tenant" t on t.id = j."tenantId" where t.slug = $1`,
      [tenant],
    ),
  ).toEqual(jobsBefore);
  expect(await sql(`select 1 from "Ad" where id = $1`, [adId])).toEqual([]);
  expect(await packOf(tenant)).toEqual({ size: 1, remaining: 0, spent: 1, live: 0 });

  // A new grant opens it again.
  expect(packs("grant", tenant, "2")).toContain(`Granted 2 unit(s). ${tenant}: 2 of 3 units remaining`);
  const again = await request.post("/api/generations", { headers: operator, data: { tenant, adId, kind: "generate" } });
  expect(again.status()).toBe(201);
});
