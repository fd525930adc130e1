import { randomBytes, randomUUID } from "node:crypto";
import { sql } from "./db";
import { expect, test } from "./fixtures";

/** A row that says running, silent for an hour, whose queue job no longer exists: a worker died with it. */
async function leftBehind(slug: string, crashResumes: number): Promise<string> {
  const id = randomUUID();
  const [tenant] = await sql<{ id: string }>(
    `INSERT INTO "Tenant" (id, slug) VALUES ($1, $2) ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug RETURNING id`,
    [randomUUID(), slug],
  );
  await sql(
    `INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "crashResumes", "budgetSoftMs", "budgetHardMs", "budgetSource", "heartbeatAt", "attemptStartedAt", "progressToken", "updatedAt")
     VALUES ($1, 'csv_import', 'imports', $2, 'running', 120, 40, 2, 42, 1, $3, 600000, 900000, 'default', now() - interval '1 hour', now() - interval '1 hour', $4, now())`,
    [id, tenant!.id, crashResumes, randomBytes(16).toString("hex")],
  );
  return id;
}

test("the reaper in the running worker resumes a job its worker left behind, and ends one that died too often with a clear message", async ({
  page,
  signIn,
}) => {
  const resumed = await leftBehind("e2e-resumed", 0);
  const ended = await leftBehind("e2e-crash-bound", 3);

  // Resumed without a human: a new attempt, its place in the queue again, a timeline event.
  await expect
    .poll(
      async () =>
        (
          await sql<{ n: string }>(
            `SELECT count(*) AS n FROM "JobEvent" WHERE "jobId" = $1 AND type = 'crash_resumed'`,
            [resumed],
          )
        )[0]?.n,
      { timeout: 20_000 },
    )
    .toBe("1");
  const [again] = await sql<{ attempt: number; crashResumes: number }>(
    `SELECT attempt, "crashResumes" FROM "Job" WHERE id = $1`,
    [resumed],
  );
  expect(again).toMatchObject({ crashResumes: 1 });
  expect(again!.attempt).toBeGreaterThan(1);

  // Past the bound: a terminal state that says what happened and what to do, never "abandoned".
  await expect
    .poll(async () => (await sql<{ status: string }>(`SELECT status FROM "Job" WHERE id = $1`, [ended]))[0]?.status, {
      timeout: 20_000,
    })
    .toBe("failed");
  const [row] = await sql<{ message: string }>(`SELECT message FROM "Job" WHERE id = $1`, [ended]);
  expect(row!.message).toMatch(
    /worker died .* times while running it; \d+ of 120 rows were done\. Retry to continue\./,
  );

  await signIn("operator");
  await page.goto(`/jobs/${ended}`);
  await expect(page.getByText(/worker died .* times while running it/).first()).toBeVisible();
  await page.screenshot({ path: "test-results/crash-bound.png", fullPage: true });
});

test("the database panel shows table activity per second", async ({ operatorPage: page }) => {
  await page.goto("/database");
  await expect(page.getByRole("heading", { name: "Database" })).toBeVisible();
  await expect(page.getByRole("cell", { name: "Category", exact: true })).toBeVisible();
  await expect(page.getByRole("columnheader", { name: "Seq scans /s", exact: true })).toBeVisible();
  await page.screenshot({ path: "test-results/database.png", fullPage: true });
});
