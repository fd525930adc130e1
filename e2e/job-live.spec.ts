import { sql } from "./db";
import { transactionsCsv } from "./csv";
import { E2E_ENV } from "./env";
import { expect, test, users, VIEWER } from "./fixtures";

// About a minute of work on this system: still running while the page watches it.
const ROWS = 20_000;
const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
const processed = async (jobId: string) =>
  (await sql<{ processed: number }>(`select processed from "Job" where id = $1`, [jobId]))[0]!.processed;

test("the job page counts a running import up from its stream, without a reload or the timer, and ends with it; only operators may open the stream", async ({
  operatorPage: page,
  request,
  credentialsFor,
}) => {
  const created = await request.post(`/api/imports?tenant=e2e-job-live`, {
    data: transactionsCsv(ROWS).csv,
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  const { jobId } = (await created.json()) as { jobId: string };
  await expect.poll(() => processed(jobId), { timeout: 30_000 }).toBeGreaterThanOrEqual(10);

  // Not the operator: refused before anything is streamed.
  await credentialsFor("viewer");
  const viewerToken = users("token", VIEWER.username).trim().split("\n").pop()!;
  expect((await request.get(`/api/jobs/${jobId}/events`)).status()).toBe(401);
  const asViewer = await request.get(`/api/jobs/${jobId}/events`, {
    headers: { authorization: `Bearer ${viewerToken}` },
  });
  expect(asViewer.status()).toBe(403);

  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`/jobs/${jobId}`);
  const live = page.getByTestId("live-status");
  await expect(live).toHaveAttribute("data-mode", "stream");
  await expect(live).toContainText("live, as the job changes");
  // A full page load would lose this.
  await page.evaluate(() => ((window as unknown as { marker: string }).marker = "kept"));
  const done = page.getByTestId("job-done");
  // Twice within less than the timer's 5 s: each count comes from the stream.
  for (let i = 0; i < 2; i++) await expect(done).not.toHaveText((await done.textContent())!, { timeout: 2_000 });
  await expect(page.getByTestId("job-pace")).toContainText(/left|rows? per/);
  expect(await page.evaluate(() => (window as unknown as { marker?: string }).marker)).toBe("kept");
  await page.screenshot({ path: "test-results/job-live-1440.png", fullPage: false });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: "test-results/job-live-390.png", fullPage: false });
  await page.setViewportSize({ width: 1440, height: 900 });

  // Its end reaches the page by the stream too, and the page goes back to its timer.
  const cancelled = await request.post(`/api/jobs/${jobId}/cancel`, { data: {}, headers: operator });
  expect([200, 202]).toContain(cancelled.status());
  await expect(page.locator("h1 [data-status]")).toHaveAttribute("data-status", "cancelled");
  await expect(live).toHaveAttribute("data-mode", "poll");
  expect(await page.evaluate(() => (window as unknown as { marker?: string }).marker)).toBe("kept");
});
