import { randomBytes, randomUUID } from "node:crypto";
import { Queue } from "bullmq";
import { sql } from "./db";
import { E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

/**
 * An open row the reaper leaves alone, with a queue job held an hour in *delayed* (so the queue
 * has it and no worker takes it): `running` with an old heartbeat and a 10-hour hard limit
 * (heartbeat lost), or `queued` for 10 minutes with a 10-minute soft budget (a late start: 20 h of
 * production time at the e2e scale; the hard limit, ≈17 min here, is not reached).
 */
async function openRow(tenantSlug: string, status: "running" | "queued", queue: Queue): Promise<string> {
  const id = randomUUID();
  const [tenant] = await sql<{ id: string }>(`INSERT INTO "Tenant" (id, slug) VALUES ($1, $2) ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug RETURNING id`, [randomUUID(), tenantSlug]);
  await sql(
    `INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs", "budgetSource", "heartbeatAt", "attemptStartedAt", "createdAt", "progressToken", "updatedAt")
     VALUES ($1, 'csv_import', 'imports', $2, $3, 120, 40, 2, 42, $4, 600000, 2000000000, 'operator:e2e', $5, $5, now() - interval '10 minutes', $6, now())`,
    [id, tenant!.id, status, status === "running" ? 1 : 0, status === "running" ? new Date(Date.now() - 60_000) : null, randomBytes(16).toString("hex")],
  );
  await queue.add("csv_import", { jobId: id }, { jobId: id, delay: 3_600_000 });
  return id;
}

/**
 * A job the reaper ended `abandoned`, as it did before it resumed jobs whose worker died (rows of
 * that time are still in the group, for a retry): the row and the reaper's `abandoned` event.
 */
async function leftBehind(tenantSlug: string): Promise<string> {
  const id = randomUUID();
  const [tenant] = await sql<{ id: string }>(`INSERT INTO "Tenant" (id, slug) VALUES ($1, $2) ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug RETURNING id`, [randomUUID(), tenantSlug]);
  const message = "Abandoned after 42 of 120 rows: the queue no longer runs it (queue state: unknown). Retry to continue from where it stopped.";
  await sql(
    `INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs", "budgetSource", "heartbeatAt", "attemptStartedAt", "finishedAt", message, "progressToken", "updatedAt")
     VALUES ($1, 'csv_import', 'imports', $2, 'abandoned', 120, 40, 2, 42, 1, 600000, 900000, 'default', now() - interval '1 hour', now() - interval '1 hour', now(), $3, $4, now())`,
    [id, tenant!.id, message, randomBytes(16).toString("hex")],
  );
  await sql(`INSERT INTO "JobEvent" ("jobId", type, attempt, message) VALUES ($1, 'abandoned', 1, $2)`, [id, message]);
  return id;
}

test("a retry on the stuck page moves the reaper's jobs out of their group, without a reload", async ({ operatorPage: page }) => {
  const id = await leftBehind("e2e-stuck-retry");

  await page.goto("/stuck");
  await expect(page.getByRole("heading", { name: "Stuck jobs" })).toBeVisible();
  const group = page.getByTestId("group-reaped");
  await expect(group.getByRole("heading", { name: /^Finalised by the reaper, last 24 h \(\d+\)$/ })).toBeVisible();
  const row = group.locator(`tr[data-job="${id}"]`);
  await expect(row).toContainText("e2e-stuck-retry");
  await expect(row).toContainText("the queue no longer runs it");
  // The summary's reaper count is the reaper's own record: at least this job.
  expect(Number((await page.getByTestId("reaper-finalised").innerText()).replace(/,/g, ""))).toBeGreaterThanOrEqual(1);

  // Marked before the action: a full reload would lose it.
  await page.evaluate(() => ((window as unknown as { stillHere: boolean }).stillHere = true));
  const count = Number((await page.getByTestId("count-reaped").innerText()).replace(/[(),]/g, ""));
  const jobs = `${count.toLocaleString("en-US")} job${count === 1 ? "" : "s"}`;
  await group.getByRole("button", { name: `Retry ${jobs}…` }).click();
  // The confirm step says how many jobs it takes before anything happens.
  await expect(group.getByText(`Retry ${jobs}? Each resumes from where it stopped.`)).toBeVisible();
  expect((await sql<{ status: string }>(`SELECT status FROM "Job" WHERE id = $1`, [id]))[0]?.status).toBe("abandoned");
  await group.getByRole("button", { name: `Confirm: retry ${jobs}` }).click();

  await expect(page.getByRole("status").filter({ hasText: /^Retried \d+ of / })).toBeVisible();
  await expect(page.locator(`[data-testid="group-reaped"] tr[data-job="${id}"]`)).toHaveCount(0);
  expect(await page.evaluate(() => (window as unknown as { stillHere?: boolean }).stillHere)).toBe(true);
  expect((await sql<{ status: string }>(`SELECT status FROM "Job" WHERE id = $1`, [id]))[0]?.status).not.toBe("abandoned");
  const [audit] = await sql<{ action: string; result: string; target: string }>(`SELECT action, result, target FROM "AuditEntry" WHERE action = 'stuck.retry' ORDER BY id DESC LIMIT 1`);
  expect(audit).toMatchObject({ action: "stuck.retry", result: "ok", target: "reaped" });
});

test("marking a group failed ends its jobs; the page at 1440 px and 390 px", async ({ operatorPage: page }) => {
  const queue = new Queue("imports", { connection: { host: "127.0.0.1", port: 6379 }, prefix: E2E_ENV.BOUNDED_REDIS_PREFIX });
  const ids: string[] = [];
  try {
    await leftBehind("e2e-stuck-look");
    const silent = await openRow("e2e-stuck-look", "running", queue);
    const late = await openRow("e2e-stuck-look", "queued", queue);
    ids.push(silent, late);
    for (const [name, width, height] of [
      ["desktop", 1440, 1000],
      ["phone", 390, 844],
    ] as const) {
      await page.setViewportSize({ width, height });
      await page.goto("/stuck");
      await expect(page.getByTestId("group-heartbeat_lost").locator(`tr[data-job="${silent}"]`)).toBeVisible();
      await expect(page.getByTestId("group-late_start").locator(`tr[data-job="${late}"]`)).toBeVisible();
      // Nothing wider than the screen: tables scroll in their own box.
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      await page.screenshot({ path: `test-results/stuck-${name}.png`, fullPage: true });
    }

    const group = page.getByTestId("group-heartbeat_lost");
    const count = Number((await page.getByTestId("count-heartbeat_lost").innerText()).replace(/[(),]/g, ""));
    const jobs = `${count.toLocaleString("en-US")} job${count === 1 ? "" : "s"}`;
    await group.getByRole("button", { name: `Mark failed ${jobs}…` }).click();
    await expect(group.getByText(`Mark ${jobs} failed? Each gets a message naming you; they can be retried later.`)).toBeVisible();
    await group.getByRole("button", { name: `Confirm: mark failed ${jobs}` }).click();
    await expect(group.getByRole("status")).toHaveText(/^Marked failed \d+ of /);
    await expect(group.locator(`tr[data-job="${silent}"]`)).toHaveCount(0);
    const [row] = await sql<{ status: string; message: string }>(`SELECT status, message FROM "Job" WHERE id = $1`, [silent]);
    expect(row!.status).toBe("failed");
    expect(row!.message).toMatch(/^Marked failed by admin from the stuck page after 42 of 120 rows \(heartbeat lost: three heartbeats missed\)\. Retry/);
    // The late one is another group's: untouched.
    expect((await sql<{ status: string }>(`SELECT status FROM "Job" WHERE id = $1`, [late]))[0]?.status).toBe("queued");
  } finally {
    // Only this test's queue jobs: the late row left without one is the reaper's to end.
    for (const id of ids) await queue.remove(id).catch(() => undefined);
    await queue.close();
  }
});
