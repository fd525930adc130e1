import type { Page } from "@playwright/test";
import { transactionsCsv } from "./csv";
import { sql } from "./db";
import { expect, test } from "./fixtures";

const tag = Date.now().toString(36);
const TENANT = `e2e-forensics-${tag}`;
const FILE = `Forensics ${tag} 100%_done.csv`;
// Calls of this spec's own for the histogram, under a queue nobody else uses.
const QUEUE = `e2e-forensics-${tag}`;
const FAST_MS = [800, 810, 820];
const SLOW_MS = [5_500, 5_600, 5_700, 5_800, 6_000];

// Production time (recorded ÷ the time scale): a slow call at a small scale reads in minutes.
const LATENCY = /^\d+(\.\d)? (ms|s|min|h)( \d+ (s|min))?$/;

async function shots(page: Page, name: string) {
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.screenshot({ path: `test-results/${name}-1440.png`, fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: `test-results/${name}-390.png`, fullPage: true });
  await page.setViewportSize({ width: 1440, height: 900 });
}

test.beforeAll(async () => {
  await sql(
    `INSERT INTO "ModelCall" ("queue", "jobKind", "model", "type", "startedAt", "durationMs", "outcome")
     SELECT $1, 'csv_import', 'e2e-model', 'model', (now() AT TIME ZONE 'UTC') - interval '5 minutes', d, 'ok' FROM unnest($2::int[]) AS t(d)`,
    [QUEUE, [...FAST_MS, ...SLOW_MS]],
  );
});

test.afterAll(async () => {
  await sql(`DELETE FROM "ModelCall" WHERE "queue" = $1`, [QUEUE]);
  await sql(`DELETE FROM "ModelCallRollup" WHERE "queue" = $1`, [QUEUE]);
  await sql(`DELETE FROM "ModelCallRollupDay" WHERE "queue" = $1`, [QUEUE]);
  await sql(`DELETE FROM "ModelCallRollupWeek" WHERE "queue" = $1`, [QUEUE]);
});

test("a short-id or file-name search finds an import, and its page shows its model calls on the timeline", async ({
  operatorPage: page,
  request,
}) => {
  const { csv } = transactionsCsv(40);
  const created = await request.post("/api/imports", {
    multipart: { tenant: TENANT, file: { name: FILE, mimeType: "text/csv", buffer: Buffer.from(csv) } },
  });
  expect(created.status()).toBe(201);
  const { jobId, progressToken } = (await created.json()) as { jobId: string; progressToken: string };
  await expect
    .poll(
      async () =>
        ((await (await request.get(`/api/progress/${progressToken}`)).json()) as { terminal: boolean }).terminal,
      { timeout: 60_000 },
    )
    .toBe(true);

  // The short id, as every page shows it.
  const short = jobId.slice(0, 8);
  await page.goto("/jobs");
  const search = page.getByRole("searchbox", { name: "Search" });
  await expect(search).toHaveAttribute("placeholder", "id, tenant, file, or a row's text");
  await search.fill(short);
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(new RegExp(`q=${short}`));
  await expect(page.getByRole("link", { name: short, exact: true })).toBeVisible();
  await shots(page, "forensics-search");

  // Part of the file name, its % and _ as plain characters.
  await page.goto(`/jobs?q=${encodeURIComponent(`${tag} 100%_`)}`);
  await expect(page.locator("table.data tbody tr")).toHaveCount(1);
  await expect(page.getByRole("link", { name: short, exact: true })).toBeVisible();

  await page.getByRole("link", { name: short, exact: true }).click();
  await expect(page.getByText(jobId)).toBeVisible();
  const timeline = page.getByTestId("timeline");
  await expect(timeline.getByRole("heading", { name: /Timeline/ })).toBeVisible();
  const calls = timeline.locator('tr[data-entry="call"]');
  await expect(calls.first()).toBeVisible();
  const n = Number((await page.locator('[data-stat="calls"]').textContent())?.replace(/,/g, ""));
  expect(n).toBeGreaterThan(0);
  expect(await calls.count()).toBe(Math.min(n, 200));
  await expect(calls.first().locator('[data-cell="latency"]')).toHaveText(LATENCY);
  await expect(timeline.locator('tr[data-entry="event"][data-type="started"]')).toHaveCount(1);
  await expect(page.locator('[data-stat="latency"]')).toHaveText(/^\d.* \/ \d.*$/);
  await shots(page, "forensics-job");

  // The full list of the job's calls, each linking back to the job.
  await timeline.getByRole("link", { name: /All .* calls, newest first/ }).click();
  await expect(page.getByTestId("calls-total")).toHaveText(String(n));
  await expect(page.getByTestId("calls-table").getByRole("link", { name: short }).first()).toBeVisible();
});

test("a bar of the latency histogram opens the list of exactly the calls it counts", async ({ operatorPage: page }) => {
  await page.goto(`/model-calls?range=24h&queue=${QUEUE}`);
  const chart = page.getByTestId("latency-chart");
  const bars = chart.locator(".recharts-bar-rectangle").filter({ visible: true });
  await expect(bars.first()).toBeVisible();
  // Bars in bucket order: the first holds the three fast calls.
  await bars.first().click();
  await expect(page).toHaveURL(/\/model-calls\/calls\?.*bucket=\d+/);
  await expect(page.getByTestId("calls-total")).toHaveText(String(FAST_MS.length));
  await expect(page.getByTestId("calls-table").locator("tbody tr")).toHaveCount(FAST_MS.length);
  await shots(page, "forensics-bucket-calls");

  // The same lists from the text beside the chart.
  await page.goto(`/model-calls?range=24h&queue=${QUEUE}`);
  await page.getByTestId("bucket-list").locator("summary").click();
  await shots(page, "forensics-histogram");
  const links = page.getByTestId("bucket-list").getByRole("link");
  await expect(links).toHaveCount(2);
  await links.nth(1).click();
  await expect(page.getByTestId("calls-total")).toHaveText(String(SLOW_MS.length));
});
