import { execFileSync } from "node:child_process";
import { sql } from "./db";
import { transactionsCsv } from "./csv";
import { E2E_ENV } from "./env";
import { axeViolations } from "./axe";
import { expect, test } from "./fixtures";

const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
const WIDTHS = [
  { name: "1440", viewport: { width: 1440, height: 900 } },
  { name: "390", viewport: { width: 390, height: 844 } },
] as const;
const REMOVED =
  /^This job's details \(.+\) were removed on \d{4}-\d\d-\d\d, 90 days after it ended; its outcome and counts are kept\.$/;

/** `npm run retention` against the main system, as an operator runs it; what it printed. */
const retention = (...args: string[]) =>
  execFileSync(process.execPath, ["--import", "tsx", "scripts/retention.ts", ...args], {
    env: { ...process.env, ...E2E_ENV },
    stdio: "pipe",
  }).toString();

const itemsOf = async (jobId: string) =>
  Number((await sql<{ n: string }>(`select count(*) n from "JobItem" where "jobId" = $1`, [jobId]))[0]!.n);

test("a finished import past its retention: a dry run says what would go, a pass removes its detail, and its API, downloads, pages and retry all say so", async ({
  page,
  request,
  signIn,
}) => {
  const { csv, badRows } = transactionsCsv(12, 5);
  const created = await request.post(`/api/imports?tenant=e2e-retention`, {
    data: csv,
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  const { jobId, progressToken } = (await created.json()) as { jobId: string; progressToken: string };
  await expect
    .poll(
      async () => (await sql<{ status: string }>(`select status::text from "Job" where id = $1`, [jobId]))[0]!.status,
      {
        timeout: 30_000,
      },
    )
    .toBe("completed_with_errors");
  // Ended 100 days ago, as a job of last season would have.
  await sql(
    `update "Job" set "createdAt" = now() - interval '100 days', "startedAt" = now() - interval '100 days',
       "finishedAt" = now() - interval '100 days', "heartbeatAt" = now() - interval '100 days' where id = $1`,
    [jobId],
  );

  const dry = retention("--dry-run");
  expect(dry).toMatch(
    /^job_detail \(90 days, before \d{4}-\d\d-\d\d \d\d:\d\d UTC\): would remove \d+ job\(s\) — .*JobItem \d+/m,
  );
  expect(await itemsOf(jobId)).toBe(12);
  const ran = retention();
  expect(ran).toMatch(/^job_detail \(90 days, .*\): removed \d+ job\(s\) — .*JobItem \d+/m);
  expect(await itemsOf(jobId)).toBe(0);
  const [row] = await sql<{ processed: number; failed: number; pruned: boolean }>(
    `select processed, failed, "detailPrunedAt" is not null pruned from "Job" where id = $1`,
    [jobId],
  );
  expect(row).toEqual({ processed: 12 - badRows.length, failed: badRows.length, pruned: true });

  // The API and the downloads: 410 with what was removed and when; a retry is refused the same way.
  const api = await request.get(`/api/jobs/${jobId}`, { headers: operator });
  expect(api.status()).toBe(410);
  const body = (await api.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("job_detail_removed");
  expect(body.error.message).toMatch(REMOVED);
  for (const file of ["result.csv", "failed-rows.csv"]) {
    const download = await request.get(`/api/progress/${progressToken}/${file}`);
    expect(download.status()).toBe(410);
    expect(((await download.json()) as { error: { message: string } }).error.message).toMatch(REMOVED);
  }
  const retry = await request.post(`/api/jobs/${jobId}/retry`, { data: {}, headers: operator });
  expect(retry.status()).toBe(410);

  // The pages: the outcome and counts, the sentence, and no section left empty.
  await signIn("operator");
  for (const { name, viewport } of WIDTHS) {
    await page.setViewportSize(viewport);
    await page.goto(`/jobs/${jobId}`);
    await expect(page.getByTestId("detail-removed")).toContainText("Details removed:");
    await expect(page.getByTestId("detail-removed")).toContainText("It cannot be retried or split");
    await expect(page.locator("[data-status]").first()).toHaveAttribute("data-status", "completed_with_errors");
    await expect(page.getByRole("heading", { name: /Timeline/ })).toHaveCount(0);
    await expect(page.getByRole("button", { name: "Retry from where it stopped" })).toHaveCount(0);
    // Its outcome no longer points at a list that is gone.
    await expect(
      page.getByText("Imported 10 of 12 rows; 2 rows could not be imported.", { exact: true }),
    ).toBeVisible();
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: `test-results/retention-job-${name}.png`, fullPage: true });

    await page.goto(`/progress/${progressToken}`);
    await expect(page.getByTestId("detail-removed")).toHaveText(REMOVED);
    await expect(page.getByTestId("processed")).toHaveText(String(12 - badRows.length));
    await expect(page.getByRole("link", { name: /Download/ })).toHaveCount(0);
    await expect(page.getByTestId("message")).toHaveText("Imported 10 of 12 rows; 2 rows could not be imported.");
    await expect(page.getByTestId("next")).toContainText("was removed with this job's details");
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: `test-results/retention-progress-${name}.png`, fullPage: true });
  }
});

test("/database shows what each class of history keeps, its tables' sizes and oldest row, and what is kept without a limit", async ({
  page,
  signIn,
}) => {
  await signIn("viewer");
  for (const { name, viewport } of WIDTHS) {
    await page.setViewportSize(viewport);
    await page.goto("/database");
    const section = page.getByRole("region", { name: "Retention" });
    await expect(section).toBeVisible();
    const classes = section.getByTestId("retention");
    for (const [cls, days] of [
      ["job_detail", "90 days"],
      ["model_calls", "30 days"],
      ["audit", "730 days"],
    ] as const)
      await expect(classes.locator(`[data-class="${cls}"] h3`)).toHaveText(`${cls} · kept ${days}`);
    await expect(classes.locator('[data-class="model_calls"]')).toContainText(
      /ModelCall [\d.]+ (bytes|KB|MB|GB), [\d,]+ rows/,
    );
    await expect(section.getByTestId("retention-ok")).toHaveText("Every class is within its retention.");
    await expect(section.getByTestId("retention-kept")).toContainText(/MarketplaceRecord \d/);
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: `test-results/retention-database-${name}.png`, fullPage: true });
  }
});
