import { randomUUID } from "node:crypto";
import { sql } from "./db";
import { expect, test } from "./fixtures";

// A tenant's import whose rows repeat questions, then its second file: the job pages say where
// the rows' categories came from, /model-calls shows the reuse, and an operator clears the
// tenant's stored answers there.
const TENANT = `e2e-answers-${randomUUID().slice(0, 8)}`;
const COUNTERPARTIES = ["REWE Markt", "DB Bahn", "Netflix"];

/** 9 rows, 3 questions: dates and amounts differ, the counterparty and description repeat. */
const CSV = [
  "date,amount,currency,counterparty,description",
  ...Array.from(
    { length: 9 },
    (_, i) => `2026-02-${String(i + 1).padStart(2, "0")},-${i + 3}.20,EUR,${COUNTERPARTIES[i % 3]},card payment`,
  ),
].join("\n");

async function importFile(page: import("@playwright/test").Page, name: string): Promise<string> {
  await page.goto("/upload");
  await page.getByLabel("Your account (tenant)").fill(TENANT);
  await page
    .getByLabel("Bank transactions (CSV)")
    .setInputFiles({ name, mimeType: "text/csv", buffer: Buffer.from(`${CSV}\n`) });
  await page.getByRole("button", { name: "Upload and import" }).click();
  await page.waitForURL(/\/progress\/[0-9a-f]{32}$/);
  const token = page.url().split("/").pop()!;
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  const [job] = await sql<{ id: string }>(`select id from "Job" where "progressToken" = $1`, [token]);
  return job!.id;
}

test("rows with the same question are asked once, a second file reuses the tenant's answers, and an operator clears them", async ({
  operatorPage: page,
}) => {
  const first = await importFile(page, "february.csv");
  await page.goto(`/jobs/${first}`);
  await expect(page.getByTestId("job-answer-reuse")).toContainText(
    "0 rows from stored answers, 6 shared within the job, 3 asked the model",
  );
  // Every row's answer is the primary's model's: no kind fails over here.
  await expect(page.getByTestId("job-answered-by")).toHaveText("bounded-sim-1 (primary): 9 rows");

  const second = await importFile(page, "february-again.csv");
  await page.goto(`/jobs/${second}`);
  await expect(page.getByTestId("job-answer-reuse")).toContainText(
    "3 rows from stored answers, 6 shared within the job, 0 asked the model",
  );

  await page.goto("/model-calls");
  const reuse = page.getByTestId("answer-reuse-by-kind");
  await expect(reuse.getByRole("row", { name: /csv_import/ })).toBeVisible();
  // Filtered by another kind, the section is that kind's alone.
  await page.goto("/model-calls?kind=agent_run");
  await expect(page.locator("#reuse-title")).toHaveText(/^Answers reused by agent_run, last /);
  await expect(page.getByTestId("answer-reuse-by-kind")).toHaveCount(0);
  await page.goto("/model-calls");
  await page.getByTestId("answer-reuse").getByLabel("Tenant").fill(TENANT);
  await page.getByRole("button", { name: "Clear stored answers" }).click();
  await expect(page.getByRole("status")).toContainText(`Cleared 3 stored category answers of ${TENANT}`);
  const [left] = await sql<{ n: string }>(
    `select count(*) as n from "CategoryAnswer" a join "Tenant" t on t.id = a."tenantId" where t.slug = $1`,
    [TENANT],
  );
  expect(Number(left!.n)).toBe(0);
});
