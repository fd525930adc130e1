import { transactionsCsv } from "./csv";
import { sql as sqlOn } from "./db";
import { DEFAULT_ENV, DEFAULT_URL } from "./env";
import { expect, test } from "./fixtures";

// On the system with nothing overridden (1/20 of production time): the simulated model, not the
// machine, sets an import's pace there — about 125 rows a second — so a file of 2,000 rows is still
// running while the page is open and cancelled, whatever the machine's speed, and its retry is a
// few thousand rows of work, not twenty.
test.use({ baseURL: DEFAULT_URL });
const sql = <T extends Record<string, unknown>>(text: string, params: unknown[] = []) =>
  sqlOn<T>(text, params, DEFAULT_ENV.DATABASE_URL);
const ROWS = 2_000;
const jobRow = async (jobId: string) =>
  (
    await sql<{ status: string; processed: number; cursor: number; message: string | null }>(
      `select status::text, processed, cursor, message from "Job" where id = $1`,
      [jobId],
    )
  )[0]!;

/**
 * Rows written for the job: the retry is a new attempt, projected like any start, and on a loaded
 * machine the rows left may not fit the budget; the job then finishes in parts, each writing its
 * rows under its own id.
 */
const rowsWritten = async (jobId: string) =>
  (
    await sql<{ n: string; rows: string }>(
      `select count(*) n, count(distinct row) rows from "Transaction"
       where "jobId" = $1 or "jobId" in (select id from "Job" where "parentId" = $1)`,
      [jobId],
    )
  )[0]!;
/** A retry that writes no row for this long has stopped: the test fails then, however fast the machine. */
const STALL_MS = 60_000;

/** Waits until the job is `completed`, failing as soon as a minute passes with no row written. */
async function finishesWithoutStalling(jobId: string): Promise<void> {
  let last = -1;
  let since = Date.now();
  for (;;) {
    const { status } = await jobRow(jobId);
    if (status === "completed") return;
    expect(["queued", "running", "delayed"], "the retry ended otherwise than completed").toContain(status);
    const written = Number((await rowsWritten(jobId)).n);
    if (written !== last) [last, since] = [written, Date.now()];
    expect(Date.now() - since, `no row written for a minute: ${written} of ${ROWS}, the job ${status}`).toBeLessThan(
      STALL_MS,
    );
    await new Promise((r) => setTimeout(r, 500));
  }
}

test("an operator cancels a running import from the job page: it stops before its next rows, keeps them, and a retry finishes every row once", async ({
  page,
  request,
  signIn,
}) => {
  // Its retry's wait below is longer than the suite's two minutes a test: it ends when the retry
  // stops writing rows, not at a fixed time.
  test.setTimeout(600_000);
  await signIn("operator");
  const created = await request.post(`/api/imports?tenant=e2e-cancel`, {
    data: transactionsCsv(ROWS).csv,
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  const { jobId, progressToken } = (await created.json()) as { jobId: string; progressToken: string };
  await expect.poll(async () => (await jobRow(jobId)).processed, { timeout: 30_000 }).toBeGreaterThanOrEqual(10);

  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`/jobs/${jobId}`);
  await expect(page.locator("[data-status]").first()).toHaveAttribute("data-status", "running");
  const panel = page.getByRole("region", { name: "Cancel" });
  await expect(panel.getByRole("button", { name: "Cancel job" })).toBeVisible();
  await panel.getByRole("button", { name: "Cancel job" }).click();
  // The confirm step says what happens before anything does.
  await expect(panel.getByText("Cancel this job? It stops before its next row.")).toBeVisible();
  await page.screenshot({ path: "test-results/cancel-confirm-1440.png" });
  await page.setViewportSize({ width: 390, height: 844 });
  await panel.scrollIntoViewIfNeeded();
  await page.screenshot({ path: "test-results/cancel-confirm-390.png" });
  await page.setViewportSize({ width: 1440, height: 900 });
  await panel.getByLabel("Reason (optional, kept in the job’s timeline)").fill("wrong file");
  const beforeCancel = (await jobRow(jobId)).processed;
  await panel.getByRole("button", { name: "Yes, cancel the job" }).click();
  await expect(panel.getByRole("status")).toContainText("Cancel requested: the run stops before its next row");

  await expect.poll(async () => (await jobRow(jobId)).status, { timeout: 15_000 }).toBe("cancelled");
  // The run flips the status first (fencing its commits), then writes the message from the final
  // counts in a second statement: a read in between sees the running row's message (null).
  await expect.poll(async () => (await jobRow(jobId)).message, { timeout: 5_000 }).toMatch(/^Cancelled by/);
  const stopped = await jobRow(jobId);
  // Stopped before its next rows — those in flight when it was asked, a few seconds' worth at this
  // pace — short of the end of the file, with what it committed kept.
  expect(stopped.processed - beforeCancel).toBeLessThan(ROWS / 4);
  expect(stopped.processed).toBeLessThan(ROWS);
  expect(stopped.message).toBe(
    `Cancelled by admin (“wrong file”) after ${stopped.processed.toLocaleString("en-US")} of ${ROWS.toLocaleString("en-US")} rows; the rows done are kept. Retry to continue from where it stopped.`,
  );
  const [kept] = await sql<{ n: string }>(`select count(*) n from "Transaction" where "jobId" = $1`, [jobId]);
  expect(Number(kept!.n)).toBe(stopped.processed);
  // Nothing writes after the cancel: the run is over. An absence, so a clock: a write would have landed by now.
  await page.waitForTimeout(1_000);
  expect((await jobRow(jobId)).processed).toBe(stopped.processed);
  const audit = await sql<{ actor: string; result: string }>(
    `select actor, result::text from "AuditEntry" where action = 'job.cancel' and target = $1`,
    [jobId],
  );
  expect(audit).toEqual([{ actor: "admin", result: "ok" }]);

  await page.reload();
  await expect(page.locator("[data-status]").first()).toHaveAttribute("data-status", "cancelled");
  await expect(page.getByText(stopped.message!).first()).toBeVisible();
  await page.screenshot({ path: "test-results/cancel-job-1440.png" });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: "test-results/cancel-job-390.png" });
  await page.setViewportSize({ width: 1440, height: 900 });

  // What the retry panel promises: the rows done are kept, not done again (held below: every row once).
  await expect(
    page.getByText(`the ${stopped.processed.toLocaleString("en-US")} items already done are not done again`),
  ).toBeVisible();
  await page.getByRole("button", { name: "Retry from where it stopped" }).click();
  await expect(page.getByRole("status").filter({ hasText: "Queued again" })).toBeVisible();
  // Most of the file left: what is checked is that the retry keeps going to the end, not its speed.
  await finishesWithoutStalling(jobId);
  expect(await rowsWritten(jobId)).toEqual({ n: String(ROWS), rows: String(ROWS) });
  await page.goto(`/progress/${progressToken}`);
  await expect(page.getByTestId("progress-percent")).toHaveText("100 %");
});
