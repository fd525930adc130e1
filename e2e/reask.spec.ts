import { sql } from "./db";
import { transactionsCsv } from "./csv";
import { E2E_ENV } from "./env";
import { expect, test, users, VIEWER } from "./fixtures";

// An import answered by the primary, then an operator asks all of its rows again on the backup
// provider from the job page: the plan before sending, the earlier answers kept beside the new
// ones, the rows now the backup's — and the customer's page saying so — at 1440 and 390 px.

/** An import of `rows` valid rows that completed. */
async function completedImport(request: import("@playwright/test").APIRequestContext, tenant: string, rows: number) {
  const created = await request.post(`/api/imports?tenant=${tenant}`, {
    data: transactionsCsv(rows).csv,
    headers: { "content-type": "text/csv" },
  });
  const { jobId, progressToken } = (await created.json()) as { jobId: string; progressToken: string };
  await expect
    .poll(async () => (await sql<{ status: string }>(`select status from "Job" where id = $1`, [jobId]))[0]?.status, {
      timeout: 30_000,
    })
    .toBe("completed");
  return { jobId, progressToken };
}

test("an operator asks an import's rows again on the backup provider: the plan first, earlier and new answers side by side, the customer told", async ({
  operatorPage: page,
  request,
}) => {
  const { jobId, progressToken } = await completedImport(request, "e2e-reask", 12);
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`/jobs/${jobId}`);
  const panel = page.getByTestId("reask-panel");
  const preview = panel.getByTestId("reask-preview");
  // The route's first provider answered every row: no fallback rows, nothing to send.
  await expect(preview).toHaveText("Before sending: No rows a fallback answered to ask again.");
  await expect(panel.getByRole("button", { name: "Ask these rows again" })).toBeDisabled();
  await panel.getByLabel("Ask on").selectOption("backup");
  await panel.getByLabel("Rows").selectOption("all");
  await expect(preview).toHaveText(
    /^Before sending: 12 rows \(all rows\) on backup \(bounded-sim-backup-1\): 2 model calls, (about \$[\d.]+|cost unknown \(no price or no answers yet\)), (about [\d,]+ s|time unknown until the provider has answered enough calls)\.$/,
  );
  await panel.screenshot({ path: "test-results/reask-form.png" });
  await page.setViewportSize({ width: 390, height: 844 });
  await panel.screenshot({ path: "test-results/reask-form-390.png" });
  await page.setViewportSize({ width: 1440, height: 900 });

  await panel.getByRole("button", { name: "Ask these rows again" }).click();
  const status = panel.getByRole("status").filter({ hasText: "Asking again" });
  await expect(status).toContainText("Asking again: 12 rows (all rows) on backup (bounded-sim-backup-1)");
  const reaskJobId = /Follow it on job ([0-9a-f-]{36})/.exec((await status.textContent()) ?? "")![1]!;
  await expect
    .poll(
      async () => (await sql<{ status: string }>(`select status from "Job" where id = $1`, [reaskJobId]))[0]?.status,
      { timeout: 30_000 },
    )
    .toBe("completed");
  const audit = await sql<{ actor: string; result: string }>(
    `select actor, result::text from "AuditEntry" where action = 'job.reask' and target = $1`,
    [jobId],
  );
  expect(audit).toEqual([{ actor: "admin", result: "ok" }]);

  await page.goto(`/jobs/${jobId}`);
  await expect(panel.getByTestId("reask-summary")).toHaveText(/^12 rows asked again; \d+ got another category\.$/);
  const table = panel.getByTestId("reask-rows");
  await expect(table.getByRole("row")).toHaveCount(13);
  await expect(table.getByRole("row").nth(1)).toContainText(/bounded-sim-1.*bounded-sim-backup-1/);
  await expect(page.getByTestId("job-answered-by")).toHaveText("bounded-sim-backup-1 (backup): 12 rows");
  // Now every row is a fallback's: the form offers them back to the primary.
  await panel.getByLabel("Ask on").selectOption("primary");
  await expect(preview).toHaveText(
    /^Before sending: 12 rows \(rows a fallback answered\) on primary \(bounded-sim-1\)/,
  );
  await page.screenshot({ path: "test-results/reask-job-page.png", fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await panel.screenshot({ path: "test-results/reask-rows-390.png" });

  // The re-ask job's own page names its import.
  await page.goto(`/jobs/${reaskJobId}`);
  await expect(page.getByTestId("reask-panel")).toContainText(`Rows of import ${jobId} asked again on backup.`);

  // The customer's page, at both widths.
  for (const width of [390, 1440]) {
    await page.setViewportSize({ width, height: 844 });
    await page.goto(`/progress/${progressToken}`);
    await expect(page.getByTestId("other-models")).toHaveText(
      "All 12 rows were answered by a backup model (bounded-sim-backup-1) instead of the main one.",
    );
    await page.screenshot({ path: `test-results/reask-customer-${width}.png`, fullPage: true });
  }
});

test("re-asking is for operators, checked on the server; a wrong body is a 422 that says what is wrong, and nothing starts", async ({
  viewerPage: page,
  request,
}) => {
  const { jobId } = await completedImport(request, "e2e-reask-refused", 3);
  await page.goto(`/jobs/${jobId}`);
  const panel = page.getByTestId("reask-panel");
  await expect(panel.getByRole("button", { name: "Ask these rows again" })).toBeDisabled();
  await expect(panel.getByText("Only operators can ask rows again; you are signed in as a viewer.")).toBeVisible();

  const viewerToken = users("token", VIEWER.username).trim().split("\n").pop()!;
  const asViewer = await request.post(`/api/jobs/${jobId}/retry`, {
    data: { route: "backup", rows: "all" },
    headers: { authorization: `Bearer ${viewerToken}` },
  });
  expect(asViewer.status()).toBe(403);
  const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
  const cases: [unknown, number, RegExp][] = [
    [{ route: "backup", rows: "some" }, 422, /rows is one of fallback, failed, all/],
    [{ rows: "all" }, 422, /rows needs a route/],
    [{ route: "backup", budgetSoftS: 1200 }, 422, /a re-ask \(route\) runs as a job of its own/],
    [{ route: "spare", rows: "all" }, 422, /No model provider "spare" \(there are: primary, backup\)/],
    [{ route: "primary", rows: "failed" }, 409, /This import has no failed rows/],
  ];
  for (const [data, status, message] of cases) {
    const res = await request.post(`/api/jobs/${jobId}/retry`, { data, headers: operator });
    expect(res.status(), JSON.stringify(data)).toBe(status);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(message);
  }
  const [started] = await sql<{ n: string }>(
    `select count(*) as n from "Job" where kind = 'category_reask' and params->>'sourceJobId' = $1`,
    [jobId],
  );
  expect(started!.n).toBe("0");
  // The API twin of the form: 202 with the new job and its plan.
  const ok = await request.post(`/api/jobs/${jobId}/retry`, {
    data: { route: "backup", rows: "all" },
    headers: operator,
  });
  expect(ok.status()).toBe(202);
  expect(await ok.json()).toMatchObject({
    sourceJobId: jobId,
    status: "queued",
    plan: { provider: "backup", count: 3 },
  });
});

test("bulk re-ask from the jobs page: Preview counts the ended imports with such rows, only then is it offered, and each gets a re-ask", async ({
  operatorPage: page,
  request,
}) => {
  const { jobId } = await completedImport(request, "e2e-reask-bulk", 4);
  await page.goto("/jobs");
  const form = page.getByRole("form", { name: "Bulk re-ask" });
  await form.getByLabel("Rows").selectOption("all");
  await form.getByLabel("Ask on").selectOption("backup");
  await form.getByLabel("Tenant").fill("e2e-reask-bulk");
  await expect(form.getByRole("button", { name: "Ask matching imports again" })).toBeDisabled();
  await form.getByRole("button", { name: "Preview" }).click();
  await expect(
    form.getByText("1 ended import has rows: each would be asked again on backup, as a job of its own."),
  ).toBeVisible();
  await page.setViewportSize({ width: 1440, height: 900 });
  await form.screenshot({ path: "test-results/bulk-reask.png" });
  await page.setViewportSize({ width: 390, height: 844 });
  await form.screenshot({ path: "test-results/bulk-reask-390.png" });
  await form.getByRole("button", { name: "Ask again in 1 import" }).click();
  await expect(form.getByRole("status")).toHaveText(
    "Asking the all rows of 1 of 1 matching imports again on backup, each as a job of its own.",
  );
  await expect
    .poll(
      async () =>
        (
          await sql<{ status: string }>(
            `select status from "Job" where kind = 'category_reask' and params->>'sourceJobId' = $1`,
            [jobId],
          )
        )[0]?.status,
      { timeout: 30_000 },
    )
    .toBe("completed");
  const audit = await sql<{ action: string; result: string }>(
    `select action, result::text from "AuditEntry" where action like 'jobs.reask%' and params->>'tenant' = 'e2e-reask-bulk' order by id`,
  );
  expect(audit).toEqual([
    { action: "jobs.reask.preview", result: "ok" },
    { action: "jobs.reask", result: "ok" },
  ]);
});
