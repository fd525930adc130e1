import { randomBytes, randomUUID } from "node:crypto";
import { sql } from "./db";
import { expect, test } from "./fixtures";

test("the reaper in the running worker abandons a job its worker left behind, and /stuck shows it as reaped", async ({ page, signIn }) => {
  // A row that says running, silent for an hour, whose queue job no longer exists: a worker died with it.
  const id = randomUUID();
  const [tenant] = await sql<{ id: string }>(`INSERT INTO "Tenant" (id, slug) VALUES ($1, 'e2e-reaped') ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug RETURNING id`, [randomUUID()]);
  await sql(
    `INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs", "budgetSource", "heartbeatAt", "attemptStartedAt", "progressToken", "updatedAt")
     VALUES ($1, 'csv_import', 'imports', $2, 'running', 120, 40, 2, 42, 1, 600000, 900000, 'default', now() - interval '1 hour', now() - interval '1 hour', $3, now())`,
    [id, tenant!.id, randomBytes(16).toString("hex")],
  );

  await expect.poll(async () => (await sql<{ status: string }>(`SELECT status FROM "Job" WHERE id = $1`, [id]))[0]?.status, { timeout: 20_000 }).toBe("abandoned");
  const [row] = await sql<{ message: string }>(`SELECT message FROM "Job" WHERE id = $1`, [id]);
  expect(row!.message).toMatch(/^Abandoned after 42 of 120 rows: /);

  await signIn("operator");
  await page.goto("/stuck");
  await expect(page.getByRole("heading", { name: "Stuck jobs" })).toBeVisible();
  const reaped = page.getByRole("row").filter({ has: page.getByRole("link", { name: id.slice(0, 8) }) });
  await expect(reaped).toContainText("e2e-reaped");
  await page.screenshot({ path: "test-results/stuck.png", fullPage: true });
});

test("the database panel shows table activity per second", async ({ operatorPage: page }) => {
  await page.goto("/database");
  await expect(page.getByRole("heading", { name: "Database" })).toBeVisible();
  await expect(page.getByRole("cell", { name: "Category", exact: true })).toBeVisible();
  await expect(page.getByRole("columnheader", { name: "Seq scans /s", exact: true })).toBeVisible();
  await page.screenshot({ path: "test-results/database.png", fullPage: true });
});
