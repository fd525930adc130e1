import { sql } from "./db";
import { transactionsCsv } from "./csv";
import { E2E_ENV } from "./env";
import { expect, test, users, VIEWER } from "./fixtures";

/** An import that ran, then made to look as a timeout leaves it: 10 of 30 rows done. */
async function timedOutImport(request: import("@playwright/test").APIRequestContext, tenant: string) {
  const created = await request.post(`/api/imports?tenant=${tenant}`, {
    data: transactionsCsv(30).csv,
    headers: { "content-type": "text/csv" },
  });
  const { jobId, progressToken } = await created.json();
  await expect
    .poll(async () => (await sql<{ status: string }>(`select status from "Job" where id = $1`, [jobId]))[0]?.status, {
      timeout: 30_000,
    })
    .toBe("completed");
  // Undone as a run stopped at row 11 leaves it: its writes and its items' commit records.
  await sql(`delete from "Transaction" where "jobId" = $1 and row > 11`, [jobId]);
  await sql(`delete from "CategoryAnswerUse" where "jobId" = $1 and row > 11`, [jobId]);
  await sql(`delete from "JobItem" where "jobId" = $1 and item > 10`, [jobId]);
  await sql(
    `update "Job" set status = 'timed_out', cursor = 10, processed = 10, message = 'Timed out after 10 of 30 rows (budget 600 s).' where id = $1`,
    [jobId],
  );
  return { jobId: jobId as string, progressToken: progressToken as string };
}

test("an operator retries a timed-out import from the job page: it resumes at the cursor, no row is written twice, the customer's page reaches 100 %", async ({
  page,
  request,
  signIn,
}) => {
  const { jobId, progressToken } = await timedOutImport(request, "e2e-retry");
  await signIn("operator");
  await page.goto(`/jobs/${jobId}`);
  await expect(page.locator("[data-status]").first()).toHaveAttribute("data-status", "timed_out");
  await page.getByRole("button", { name: "Retry from where it stopped" }).click();
  // The retry form's own status line (the page also says, as a status, why the job waits).
  await expect(page.getByRole("status").filter({ hasText: "Queued again" })).toBeVisible();

  await expect
    .poll(async () => (await sql<{ status: string }>(`select status from "Job" where id = $1`, [jobId]))[0]?.status, {
      timeout: 30_000,
    })
    .toBe("completed");
  const [counts] = await sql<{ n: string; rows: string }>(
    `select count(*) n, count(distinct row) rows from "Transaction" where "jobId" = $1`,
    [jobId],
  );
  expect(counts).toEqual({ n: "30", rows: "30" });
  const [attempts] = await sql<{ attempt: number }>(`select attempt from "Job" where id = $1`, [jobId]);
  expect(attempts!.attempt).toBe(2);
  const audit = await sql<{ actor: string; result: string }>(
    `select actor, result::text from "AuditEntry" where action = 'job.retry' and target = $1`,
    [jobId],
  );
  expect(audit).toEqual([{ actor: "admin", result: "ok" }]);

  await page.goto(`/progress/${progressToken}`);
  await expect(page.getByTestId("progress-percent")).toHaveText("100 %");
  await page.goto(`/jobs/${jobId}`);
  await page.screenshot({ path: "test-results/job-after-retry.png", fullPage: true });
});

test("a viewer sees Retry disabled with the reason, and the server refuses viewer and anonymous retries, each leaving an audit entry", async ({
  viewerPage: page,
  request,
}) => {
  const { jobId } = await timedOutImport(request, "e2e-retry-viewer");
  const viewerToken = users("token", VIEWER.username).trim().split("\n").pop()!;

  await page.goto(`/jobs/${jobId}`);
  await expect(page.getByRole("button", { name: "Retry from where it stopped" })).toBeDisabled();
  await expect(page.getByText("Only operators can retry jobs; you are signed in as a viewer.")).toBeVisible();

  const anonymous = await request.post(`/api/jobs/${jobId}/retry`, { data: {} });
  expect(anonymous.status()).toBe(401);
  const viewer = await request.post(`/api/jobs/${jobId}/retry`, {
    data: {},
    headers: { authorization: `Bearer ${viewerToken}` },
  });
  expect(viewer.status()).toBe(403);
  expect((await sql<{ status: string }>(`select status from "Job" where id = $1`, [jobId]))[0]!.status).toBe(
    "timed_out",
  );
  const audit = await sql<{ actor: string; result: string }>(
    `select actor, result::text from "AuditEntry" where action = 'job.retry' and target = $1 order by id`,
    [jobId],
  );
  expect(audit).toEqual([
    { actor: "anonymous", result: "refused" },
    { actor: VIEWER.username, result: "refused" },
  ]);

  // The operator's API twin; then a second retry of the now-queued job is refused with the reason.
  const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
  const ok = await request.post(`/api/jobs/${jobId}/retry`, { data: { budgetSoftS: 1200 }, headers: operator });
  expect(ok.status()).toBe(422); // below the 200,000 s the workers resolve here: out of bounds
  const retried = await request.post(`/api/jobs/${jobId}/retry`, { data: {}, headers: operator });
  expect(retried.status()).toBe(202);
  const again = await request.post(`/api/jobs/${jobId}/retry`, { data: {}, headers: operator });
  expect([409]).toContain(again.status());
  expect((await again.json()).error.code).toBe("job_not_retryable");
  const bad = await request.post(`/api/jobs/${jobId}/retry`, {
    data: Buffer.from("{not json"),
    headers: { ...operator, "content-type": "application/json" },
  });
  expect(bad.status()).toBe(400);
});

test("bulk retry by filter: a preview count first, then the retry; bad filters are a 422", async ({ request }) => {
  const { jobId } = await timedOutImport(request, "e2e-bulk-retry");
  const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
  const filter = { tenant: "e2e-bulk-retry", status: "timed_out" };
  const preview = await request.post("/api/jobs/retry", { headers: operator, data: { filter, dryRun: true } });
  expect(await preview.json()).toEqual({ count: 1, cap: 1000, overCap: false });
  expect((await sql<{ status: string }>(`select status from "Job" where id = $1`, [jobId]))[0]!.status).toBe(
    "timed_out",
  );

  const done = await request.post("/api/jobs/retry", { headers: operator, data: { filter } });
  expect(done.status()).toBe(202);
  expect(await done.json()).toMatchObject({ matched: 1, retried: 1, refused: [] });
  const bad = await request.post("/api/jobs/retry", { headers: operator, data: { filter: { status: "completed" } } });
  expect(bad.status()).toBe(422);
});

test("bulk retry from the jobs page: Preview counts the matching jobs, only then Retry is offered, and it retries them", async ({
  page,
  request,
  signIn,
}) => {
  const { jobId } = await timedOutImport(request, "e2e-bulk-page");
  await signIn("operator");
  await page.goto("/jobs");
  const form = page.getByRole("form", { name: "Bulk retry" });
  await form.getByLabel("Tenant").fill("e2e-bulk-page");
  await expect(form.getByRole("button", { name: "Retry matching jobs" })).toBeDisabled();
  await form.getByRole("button", { name: "Preview" }).click();
  await expect(form.getByText("1 job matches. Each resumes at its cursor.")).toBeVisible();
  // Changing the filter after the preview asks for a new one.
  await form.getByLabel("Status").selectOption("failed");
  await expect(form.getByRole("button", { name: "Retry matching jobs" })).toBeDisabled();
  await form.getByLabel("Status").selectOption("timed_out");
  await form.getByRole("button", { name: "Preview" }).click();
  await expect(form.getByText("1 job matches. Each resumes at its cursor.")).toBeVisible();
  await page.screenshot({ path: "test-results/jobs-bulk-retry.png", fullPage: true });
  await expect(form.getByLabel("Status")).toHaveValue("timed_out");
  await expect(form.getByLabel("Tenant")).toHaveValue("e2e-bulk-page");
  await form.getByRole("button", { name: "Retry 1 job" }).click();
  await expect(form.getByRole("status")).toHaveText("Retried 1 of 1 matching jobs.");
  await expect
    .poll(async () => (await sql<{ status: string }>(`select status from "Job" where id = $1`, [jobId]))[0]?.status, {
      timeout: 30_000,
    })
    .toBe("completed");
  // Each call carried the filter on the screen: the retry exactly the one previewed last.
  const audit = await sql<{ action: string; result: string; params: unknown }>(
    `select action, result::text, params from "AuditEntry" where action like 'jobs.retry%' and params->>'tenant' = 'e2e-bulk-page' order by id`,
  );
  expect(audit).toEqual([
    { action: "jobs.retry.preview", result: "ok", params: { tenant: "e2e-bulk-page" } },
    { action: "jobs.retry.preview", result: "ok", params: { tenant: "e2e-bulk-page", status: "timed_out" } },
    { action: "jobs.retry", result: "ok", params: { tenant: "e2e-bulk-page", status: "timed_out" } },
  ]);
});
