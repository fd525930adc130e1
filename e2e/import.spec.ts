import { sql } from "./db";
import { transactionsCsv } from "./csv";
import { expect, test } from "./fixtures";

test("a 2,000-row upload with 20 bad rows moves live on the progress page and ends completed_with_errors", async ({
  page,
}) => {
  const { csv, badRows } = transactionsCsv(2000, 100);
  expect(badRows).toHaveLength(20);

  await page.goto("/upload");
  await page.getByLabel("Your account (tenant)").fill("e2e-import");
  await page
    .getByLabel("Bank transactions (CSV)")
    .setInputFiles({ name: "january.csv", mimeType: "text/csv", buffer: Buffer.from(csv) });
  await page.getByRole("button", { name: "Upload and import" }).click();

  await page.waitForURL(/\/progress\/[0-9a-f]{32}$/);
  const token = page.url().split("/").pop()!;
  await expect(page.getByRole("heading", { name: "Importing january.csv" })).toBeVisible();

  // The page moves on its own: a percentage strictly between 0 and 100 is seen before the end.
  const seen = new Set<number>();
  const bar = page.getByRole("progressbar");
  await expect
    .poll(
      async () => {
        const value = Number(await bar.getAttribute("aria-valuenow"));
        seen.add(value);
        return value;
      },
      { intervals: [100], timeout: 90_000 },
    )
    .toBe(100);
  expect(
    [...seen].some((v) => v > 0 && v < 100),
    `intermediate values seen: ${[...seen].join(", ")}`,
  ).toBe(true);

  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", "completed_with_errors");
  await expect(page.getByTestId("processed")).toHaveText("1,980");
  await expect(page.getByTestId("failed")).toHaveText("20");
  await expect(page.getByTestId("message")).toContainText(
    "Imported 1,980 of 2,000 rows; 20 rows could not be imported",
  );
  const failureRows = page.getByTestId("failures").locator("tbody tr");
  await expect(failureRows).toHaveCount(20);
  for (const [i, bad] of badRows.entries()) {
    await expect(failureRows.nth(i).locator("td").first()).toHaveText(String(bad.row));
    await expect(failureRows.nth(i).locator("td").nth(1)).toHaveText(bad.reason);
  }
  await page.screenshot({ path: "test-results/progress-completed-with-errors.png", fullPage: true });

  // What the page says is what the database holds: one Transaction per good row, none twice.
  const [job] = await sql<{ id: string; status: string; processed: number; failed: number }>(
    `select id, status, processed, failed from "Job" where "progressToken" = $1`,
    [token],
  );
  expect(job).toMatchObject({ status: "completed_with_errors", processed: 1980, failed: 20 });
  const [counts] = await sql<{ n: string; distinct_rows: string }>(
    `select count(*) n, count(distinct row) distinct_rows from "Transaction" where "jobId" = $1`,
    [job!.id],
  );
  expect(counts).toEqual({ n: "1980", distinct_rows: "1980" });

  // Polling stops once the job is terminal. A clock on purpose: the rule is that nothing is asked
  // for during a stretch of several polling intervals, and an absence has no state to wait for.
  let requests = 0;
  page.on("request", (r) => {
    if (r.url().includes("/api/progress/")) requests += 1;
  });
  await page.waitForTimeout(2500);
  expect(requests).toBe(0);
});

test("the progress API shows only that job, and an unknown token is a 404 page", async ({ page, request }) => {
  const { csv } = transactionsCsv(5);
  const created = await request.post("/api/imports?tenant=e2e-progress", {
    data: csv,
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  const { progressToken, progressUrl } = await created.json();
  const body = await (await request.get(`/api/progress/${progressToken}`)).json();
  const always = [
    "createdAt",
    "downloads",
    "etaSeconds",
    "expectedFinishAt",
    "failed",
    "failures",
    "filename",
    "finishedAt",
    "message",
    "next",
    "noun",
    "otherModels",
    "processed",
    "rate",
    "removedByRetention",
    "serviceWaits",
    "startedAt",
    "status",
    "statusLabel",
    "terminal",
    "title",
    "total",
    "updatedAt",
    "waitsForService",
  ];
  // While it waits: why, in the customer's words, and for how long a wait in *delayed* lasts.
  const whileWaiting = ["waiting", "waitSeconds"];
  expect(Object.keys(body)).toEqual(expect.arrayContaining(always));
  expect(Object.keys(body).filter((k) => !always.includes(k) && !whileWaiting.includes(k))).toEqual([]);
  expect(JSON.stringify(body)).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/); // no internal ids

  const missing = await page.goto(`/progress/${"0".repeat(32)}`);
  expect(missing?.status()).toBe(404);
  await expect(page.getByRole("heading", { name: "Not found" })).toBeVisible();
  expect((await request.get("/api/progress/not-a-token")).status()).toBe(404);
  await page.goto(progressUrl);
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", "completed");
});
