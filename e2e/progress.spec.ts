import { readFile } from "node:fs/promises";
import { parse } from "csv-parse/sync";
import type { Page } from "@playwright/test";
import { sql } from "./db";
import { transactionsCsv } from "./csv";
import { expect, test } from "./fixtures";

/** What a customer must never read on their page: how the work is run, not what it does for them. */
const OPERATOR_WORDS = /split|p99|budget|admin|soft|hard limit|reaper|attempt|cursor|tenant/i;

const WIDTHS = [
  { name: "1440", viewport: { width: 1440, height: 900 } },
  { name: "390", viewport: { width: 390, height: 844 } },
] as const;

async function pageText(page: Page): Promise<string> {
  // The loading state's own <main> can linger in the document for a moment after the page has streamed in.
  return page.locator("main:not([aria-busy])").innerText();
}

/** Uploads through the page a customer uses and lands on the progress page; returns its token. */
async function upload(page: Page, tenant: string, name: string, csv: string): Promise<string> {
  await page.goto("/upload");
  await page.getByLabel("Your account (tenant)").fill(tenant);
  await page
    .getByLabel("Bank transactions (CSV)")
    .setInputFiles({ name, mimeType: "text/csv", buffer: Buffer.from(csv) });
  await page.getByRole("button", { name: "Upload and import" }).click();
  await page.waitForURL(/\/progress\/[0-9a-f]{32}$/);
  return page.url().split("/").pop()!;
}

/** Clicks a download link and reads what the browser saved. */
async function download(page: Page, testId: string): Promise<{ name: string; text: string }> {
  const [file] = await Promise.all([page.waitForEvent("download"), page.getByTestId(testId).click()]);
  return { name: file.suggestedFilename(), text: await readFile((await file.path())!, "utf8") };
}

test("the failed rows round-trip: downloaded with their reasons, fixed, uploaded again, every row imported; the result downloads too", async ({
  page,
}) => {
  const { csv, badRows } = transactionsCsv(60, 6);
  expect(badRows).toHaveLength(10);
  const token = await upload(page, "e2e-progress-roundtrip", "march.csv", csv);
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", "completed_with_errors", {
    timeout: 60_000,
  });
  await expect(page.getByTestId("message")).toHaveText(
    "Imported 50 of 60 rows; 10 rows could not be imported (see the list below).",
  );
  await expect(page.getByTestId("next")).toContainText("Download the rows that could not be imported");
  expect(await pageText(page)).not.toMatch(OPERATOR_WORDS);
  for (const { name, viewport } of WIDTHS) {
    await page.setViewportSize(viewport);
    await page.screenshot({ path: test.info().outputPath(`progress-downloads-${name}.png`), fullPage: true });
  }

  // The result: the 50 imported rows with their categories, in row order.
  const result = await download(page, "download-result");
  expect(result.name).toBe("march-result.csv");
  const resultRows = parse(result.text, { bom: true }) as string[][];
  expect(resultRows[0]).toEqual(["row", "date", "amount", "currency", "counterparty", "description", "category"]);
  const badRowNumbers = new Set(badRows.map((b) => b.row));
  expect(resultRows.slice(1).map((r) => Number(r[0]))).toEqual(
    Array.from({ length: 60 }, (_, i) => i + 2).filter((r) => !badRowNumbers.has(r)),
  );
  expect(resultRows.slice(1).every((r) => r[6]!.length > 0)).toBe(true);

  // The failed rows: as uploaded, with a reason each.
  const failed = await download(page, "download-failed");
  expect(failed.name).toBe("march-failed-rows.csv");
  const failedRows = parse(failed.text, { bom: true, relax_column_count: true }) as string[][];
  expect(failedRows[0]).toEqual(["date", "amount", "currency", "counterparty", "description", "reason"]);
  expect(failedRows).toHaveLength(11);
  for (const [i, bad] of badRows.entries()) expect(failedRows[i + 1]!.at(-1)).toMatch(bad.reason);

  // What the customer does in a spreadsheet: each row made valid, the reason column left in place.
  const fixed = [
    failed.text.split("\r\n")[0]!,
    ...failedRows
      .slice(1)
      .map((r, i) =>
        [
          `2026-04-${String(i + 1).padStart(2, "0")}`,
          "-19.99",
          "EUR",
          "REWE Markt",
          `fixed ${i + 1}`,
          `"${r.at(-1)!.replaceAll('"', '""')}"`,
        ].join(","),
      ),
  ].join("\r\n");
  const again = await upload(page, "e2e-progress-roundtrip", failed.name, fixed);
  expect(again).not.toBe(token);
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  await expect(page.getByTestId("message")).toHaveText("Imported all 10 rows.");
  await expect(page.getByTestId("download-failed")).toHaveCount(0);
  const [job] = await sql<{ processed: number; failed: number }>(
    `select processed, failed from "Job" where "progressToken" = $1`,
    [again],
  );
  expect(job).toEqual({ processed: 10, failed: 0 });
});

test("whatever the operators' message says, the customer's page says what happens in plain words, for every way a job ends", async ({
  page,
  request,
}) => {
  const created = await request.post("/api/imports?tenant=e2e-progress-words", {
    data: transactionsCsv(40).csv,
    headers: { "content-type": "text/csv" },
  });
  const { jobId, progressToken } = await created.json();
  await expect
    .poll(async () => (await (await request.get(`/api/progress/${progressToken}`)).json()).status, { timeout: 60_000 })
    .toBe("completed");
  await page.goto(`/progress/${progressToken}`);
  expect(await pageText(page)).not.toMatch(OPERATOR_WORDS);

  const operatorMessage =
    "Timed out after 30 of 40 rows (budget 600 s). Split the file or retry the remaining rows. Split by admin: p99 35 s × 10 rows > soft limit; reaper at attempt 2, cursor 30, tenant e2e.";
  const expected: Record<string, { message: RegExp; next: RegExp | null }> = {
    timed_out: {
      message: /^Paused after 30 of 40 rows: this took longer than expected\.$/,
      next: /the 30 rows already imported are kept\. Our team has been told and will continue it; you don't need to upload again\. It goes on from where the import stopped with the remaining 10 rows/,
    },
    killed: {
      message: /^Stopped unexpectedly after 30 of 40 rows\.$/,
      next: /Our team has been told and will continue it/,
    },
    abandoned: {
      message: /^Stopped unexpectedly after 30 of 40 rows\.$/,
      next: /Our team has been told and will continue it/,
    },
    failed: {
      message: /^Something went wrong on our side after 30 of 40 rows\.$/,
      next: /Our team has been told and will continue it/,
    },
    cancelled: {
      message: /^Cancelled after 30 of 40 rows\.$/,
      next: /already imported are kept; nothing more will be done/,
    },
  };
  for (const [status, words] of Object.entries(expected)) {
    await sql(`update "Job" set status = $2::"JobStatus", processed = 30, failed = 0, message = $3 where id = $1`, [
      jobId,
      status,
      operatorMessage,
    ]);
    await page.goto(`/progress/${progressToken}`);
    await expect(page.locator("[data-status]")).toHaveAttribute("data-status", status);
    await expect(page.getByTestId("message")).toHaveText(words.message);
    if (words.next) await expect(page.getByTestId("next")).toHaveText(words.next);
    const text = await pageText(page);
    expect(text, status).not.toMatch(OPERATOR_WORDS);
    expect(text, status).not.toContain("Timed out after");
    const api = await (await request.get(`/api/progress/${progressToken}`)).text();
    expect(api, status).not.toMatch(OPERATOR_WORDS);
    if (status === "timed_out") {
      for (const { name, viewport } of WIDTHS) {
        await page.setViewportSize(viewport);
        await page.screenshot({ path: test.info().outputPath(`progress-timed-out-${name}.png`), fullPage: true });
      }
      await page.setViewportSize(WIDTHS[0].viewport);
    }
  }

  // "This page updates by itself when it goes on": a page left open on a job that stopped early
  // sees it finish without a reload.
  await sql(`update "Job" set status = 'timed_out', processed = 30, message = $2 where id = $1`, [
    jobId,
    operatorMessage,
  ]);
  await page.goto(`/progress/${progressToken}`);
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", "timed_out");
  await sql(`update "Job" set status = 'completed', processed = 40, message = 'Imported all 40 rows.' where id = $1`, [
    jobId,
  ]);
  await expect(page.locator("[data-status]")).toHaveAttribute("data-status", "completed");
  await expect(page.getByTestId("message")).toHaveText("Imported all 40 rows.");
});

test("the downloads answer only to the progress link: a wrong link is a 404, another kind of job offers none", async ({
  request,
}) => {
  for (const file of ["result.csv", "failed-rows.csv"]) {
    expect((await request.get(`/api/progress/${"0".repeat(32)}/${file}`)).status()).toBe(404);
    expect((await request.get(`/api/progress/not-a-token/${file}`)).status()).toBe(404);
  }
  const created = await request.post("/api/imports?tenant=e2e-progress-links", {
    data: transactionsCsv(3).csv,
    headers: { "content-type": "text/csv" },
  });
  const { progressToken } = await created.json();
  await expect
    .poll(async () => (await (await request.get(`/api/progress/${progressToken}`)).json()).status, { timeout: 60_000 })
    .toBe("completed");
  const response = await request.get(`/api/progress/${progressToken}/result.csv`);
  expect(response.status()).toBe(200);
  expect(response.headers()["content-disposition"]).toMatch(/^attachment; filename="[^"]+-result\.csv"$/);
});
