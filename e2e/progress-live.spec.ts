import type { APIRequestContext, Page } from "@playwright/test";
import { transactionsCsv } from "./csv";
import { E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

const WIDTHS = [
  { name: "390", viewport: { width: 390, height: 844 } },
  { name: "1440", viewport: { width: 1440, height: 900 } },
] as const;

/** Rows enough that the import usually still runs while a test watches it (the most an upload may have here). */
const ROWS = 5000;
/** How the watched import ends: cancelled by the test, or done first on a fast machine. */
const ENDED = /^(cancelled|completed)$/;

/** An import that runs while the test watches; `stop` cancels it as an operator would, unless it has ended (409). */
async function runningImport(request: APIRequestContext, tenant: string) {
  const created = await request.post(`/api/imports?tenant=${tenant}`, {
    data: transactionsCsv(ROWS).csv,
    headers: { "content-type": "text/csv" },
  });
  const { jobId, progressToken } = await created.json();
  await expect
    .poll(async () => (await (await request.get(`/api/progress/${progressToken}`)).json()).processed, {
      timeout: 60_000,
    })
    .toBeGreaterThan(0);
  const stop = async () => {
    const cancelled = await request.post(`/api/jobs/${jobId}/cancel`, {
      headers: { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` },
      data: {},
    });
    expect([200, 201, 202, 409]).toContain(cancelled.status());
  };
  return { jobId, token: progressToken as string, stop };
}

/** The count the page shows, once it differs from `than`: the page moved by itself. */
async function nextCount(page: Page, than: number): Promise<number> {
  await expect
    .poll(async () => Number((await page.getByTestId("processed").innerText()).replaceAll(",", "")), {
      timeout: 30_000,
    })
    .toBeGreaterThan(than);
  return Number((await page.getByTestId("processed").innerText()).replaceAll(",", ""));
}

/** The web's count of progress polls answered from its copy, before Next.js routes them (lib/progress/front-door.ts). */
async function pollsFromCopy(request: APIRequestContext): Promise<number> {
  const text = await (await request.get("/api/metrics?sources=web")).text();
  return [...text.matchAll(/^bounded_progress_polls_from_copy_total(?:\{[^}]*\})? (\d+)$/gm)].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
}

/** Counts the page's polls of the JSON answer, and how many came back 304. */
function countPolls(page: Page, token: string) {
  const polls = { sent: 0, notModified: 0, conditional: 0 };
  page.on("request", (r) => {
    if (new URL(r.url()).pathname === `/api/progress/${token}`) {
      polls.sent++;
      if (r.headers()["if-none-match"]) polls.conditional++;
    }
  });
  page.on("response", (r) => {
    if (new URL(r.url()).pathname === `/api/progress/${token}` && r.status() === 304) polls.notModified++;
  });
  return polls;
}

test("the progress page follows a running import without a reload, pushed by the stream rather than polled, and ends with the job", async ({
  page,
  request,
}) => {
  const job = await runningImport(request, "e2e-progress-live");
  const polls = countPolls(page, job.token);
  await page.goto(`/progress/${job.token}`);
  await expect(page.getByText("Updates as it happens.")).toBeVisible();
  let shown = await nextCount(page, 0);
  for (let i = 0; i < 3; i++) shown = await nextCount(page, shown);
  expect(polls.sent).toBe(0);
  for (const { name, viewport } of WIDTHS) {
    await page.setViewportSize(viewport);
    await page.screenshot({ path: test.info().outputPath(`progress-live-${name}.png`), fullPage: true });
  }
  await job.stop();
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", ENDED);
  await expect(page.getByText("Finished.")).toBeVisible();
  expect(polls.sent).toBe(0);
});

test("with the stream blocked on the way, the page still follows the import by conditional polling", async ({
  page,
  request,
}) => {
  const job = await runningImport(request, "e2e-progress-blocked");
  await page.route(`**/api/progress/${job.token}/events`, (route) => route.abort());
  const polls = countPolls(page, job.token);
  const fromCopyBefore = await pollsFromCopy(request);
  await page.goto(`/progress/${job.token}`);
  await expect(page.getByText("Updates every second.")).toBeVisible();
  let shown = await nextCount(page, 0);
  shown = await nextCount(page, shown);
  expect(polls.sent).toBeGreaterThan(0);
  expect(polls.conditional).toBe(polls.sent);
  // The web answered polls from its copy of the answer, and the page still moved with each change.
  expect(await pollsFromCopy(request)).toBeGreaterThan(fromCopyBefore);
  await job.stop();
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", ENDED);
});

test.describe("without JavaScript", () => {
  test.use({ javaScriptEnabled: false });

  test("the page shows where the job stands and a link to refresh it", async ({ page, request }) => {
    const job = await runningImport(request, "e2e-progress-nojs");
    await page.goto(`/progress/${job.token}`);
    const first = Number((await page.getByTestId("processed").innerText()).replaceAll(",", ""));
    expect(first).toBeGreaterThan(0);
    const refresh = page.getByRole("link", { name: "Refresh the page" });
    await expect(refresh).toBeVisible();
    await expect
      .poll(async () => (await (await request.get(`/api/progress/${job.token}`)).json()).processed, { timeout: 30_000 })
      .toBeGreaterThan(first);
    await refresh.click();
    await expect
      .poll(async () => Number((await page.getByTestId("processed").innerText()).replaceAll(",", "")))
      .toBeGreaterThan(first);
    for (const { name, viewport } of WIDTHS) {
      await page.setViewportSize(viewport);
      await page.screenshot({ path: test.info().outputPath(`progress-nojs-${name}.png`), fullPage: true });
    }
    await job.stop();
  });
});
