import { transactionsCsv } from "./csv";
import { sql as sqlOn } from "./db";
import { DEFAULT_ENV, DEFAULT_URL } from "./env";
import { expect, test } from "./fixtures";

// The system with nothing overridden: imports run under the default budget (600 s soft / 900 s
// hard, at a time scale of 1/20: 30 s of real time) with the catalog's rows in flight. The main
// system overrides the imports budget to days, so finishing there would prove nothing.
test.use({ baseURL: DEFAULT_URL });
const sql = <T extends Record<string, unknown>>(text: string, params: unknown[] = []) =>
  sqlOn<T>(text, params, DEFAULT_ENV.DATABASE_URL);
const operator = { authorization: `Bearer ${DEFAULT_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };

const ROWS = 2000;
const DEFAULT_SOFT_MS = 600_000;
const DEFAULT_HARD_MS = 900_000;
const SCALE = Number(DEFAULT_ENV.BOUNDED_TIME_SCALE);
const OPEN = new Set(["queued", "running", "delayed"]);

const WIDTHS = [
  { name: "390", viewport: { width: 390, height: 844 } },
  { name: "1440", viewport: { width: 1440, height: 900 } },
] as const;

test("a 2,000-row upload completes within the default 600 s budget while the progress page counts up by itself", async ({
  page,
  request,
}) => {
  const { csv, badRows } = transactionsCsv(ROWS);
  expect(badRows).toHaveLength(0);

  await page.setViewportSize(WIDTHS[1].viewport);
  await page.goto("/upload");
  await page.getByLabel("Your account (tenant)").fill("e2e-large-import");
  await page
    .getByLabel("Bank transactions (CSV)")
    .setInputFiles({ name: "march.csv", mimeType: "text/csv", buffer: Buffer.from(csv) });
  await page.getByRole("button", { name: "Upload and import" }).click();

  await page.waitForURL(/\/progress\/[0-9a-f]{32}$/);
  const token = page.url().split("/").pop()!;
  await expect(page.getByRole("heading", { name: "Importing march.csv" })).toBeVisible();

  // Every read of what the customer sees, in order: the status badge and the visible count. The
  // page is never reloaded, so any change comes from the page's own polling.
  const badge = page.locator("[data-status]");
  const processed = page.getByTestId("processed");
  const samples: { status: string; processed: number }[] = [];
  const sample = async () => {
    const status = (await badge.getAttribute("data-status")) ?? "";
    const count = Number((await processed.textContent())!.replace(/,/g, ""));
    samples.push({ status, processed: count });
    return { status, processed: count };
  };

  // Mid-run: rows are being imported and the job is still open when each picture is taken.
  await expect.poll(async () => (await sample()).processed, { intervals: [100], timeout: 30_000 }).toBeGreaterThan(0);
  for (const { name, viewport } of WIDTHS) {
    await page.setViewportSize(viewport);
    const before = await sample();
    expect(
      OPEN.has(before.status),
      `the import was already ${before.status} before the mid-run picture at ${name} px`,
    ).toBe(true);
    await page.screenshot({ path: `test-results/large-import-progress-running-${name}.png`, fullPage: true });
  }

  // Until the job ends: at each change of the page's data the count may only go up.
  await expect.poll(async () => OPEN.has((await sample()).status), { intervals: [100], timeout: 60_000 }).toBe(false);
  // The end as the customer sees it, taken before any check so that whatever it shows is on record.
  for (const { name, viewport } of WIDTHS) {
    await page.setViewportSize(viewport);
    await page.screenshot({ path: `test-results/large-import-progress-end-${name}.png`, fullPage: true });
  }

  const history = samples.map((s) => `${s.status}:${s.processed}`).join(" ");
  for (let i = 1; i < samples.length; i++)
    expect(samples[i]!.processed, `counts read in order: ${history}`).toBeGreaterThanOrEqual(samples[i - 1]!.processed);
  // Counted up by itself more than once before the end: at least three different counts were on
  // screen while the job was still open.
  const whileOpen = new Set(samples.filter((s) => OPEN.has(s.status)).map((s) => s.processed));
  expect(whileOpen.size, `distinct counts while open: ${[...whileOpen].join(", ")}`).toBeGreaterThanOrEqual(3);
  expect(
    samples.some((s) => s.status === "timed_out"),
    history,
  ).toBe(false);

  // The end: completed, every row accounted for, nothing about running out of time.
  await expect(badge).toHaveAttribute("data-status", "completed");
  await expect(badge).toHaveText("Done");
  await expect(processed).toHaveText("2,000");
  await expect(page.getByTestId("failed")).toHaveText("0");
  await expect(page.getByTestId("progress-percent")).toHaveText("100 %");
  await expect(page.getByText("2,000 of 2,000 rows read")).toBeVisible();
  await expect(page.getByTestId("message")).toHaveText("Imported all 2,000 rows.");
  await expect(page.getByText(/timed out/i)).toHaveCount(0);

  // Within its default budget: the job ran under the default budget (nothing overridden) and
  // completed in one attempt, never stopped by its deadline — the runtime ends any run that
  // outlasts its soft limit, so "completed" with no timed-out event is the proof; the duration is
  // noted for the reader.
  const [{ id: jobId }] = (await sql<{ id: string }>(`select id from "Job" where "progressToken" = $1`, [token])) as [
    { id: string },
  ];
  const response = await request.get(`/api/jobs/${jobId}`, { headers: operator });
  expect(response.status()).toBe(200);
  const job = (await response.json()) as {
    status: string;
    total: number;
    processed: number;
    failed: number;
    attempt: number;
    budgetSoftMs: number;
    budgetHardMs: number;
    budgetSource: string;
    startedAt: string;
    finishedAt: string;
    children: unknown[];
    events: { at: string; type: string; attempt: number; message: string }[];
  };
  expect(job).toMatchObject({
    status: "completed",
    total: ROWS,
    processed: ROWS,
    failed: 0,
    budgetSoftMs: DEFAULT_SOFT_MS,
    budgetHardMs: DEFAULT_HARD_MS,
    budgetSource: "default",
    children: [],
  });
  const events = job.events.map((e) => e.type);
  // One attempt — or, on a machine busier than its projection said, a slice handed over before the
  // deadline and the rest in the next attempt: never a new attempt for any other reason.
  const handedOver = events.filter((t) => t === "handed_over").length;
  expect(
    events.filter((t) => t === "started"),
    events.join(", "),
  ).toHaveLength(handedOver + 1);
  expect(job.attempt, events.join(", ")).toBe(handedOver + 1);
  expect(
    events.some((t) => /timed_out|killed/.test(t)),
    events.join(", "),
  ).toBe(false);
  const started = job.events.find((e) => e.type === "started")!;
  expect(started.message).toContain("budget 600 s soft, 900 s hard");

  const durationMs = Date.parse(job.finishedAt) - Date.parse(job.startedAt);
  const softLimitMs = DEFAULT_SOFT_MS * SCALE;
  test.info().annotations.push({
    type: "duration",
    description: `${durationMs} ms of a ${softLimitMs} ms soft limit (600 s × ${SCALE})`,
  });
  expect(Date.parse(started.at)).toBe(Date.parse(job.startedAt));

  // What the page counted is what the database holds: one transaction per row, none twice.
  const [written] = await sql<{ n: string; rows: string }>(
    `select count(*) n, count(distinct row) rows from "Transaction" where "jobId" = $1`,
    [jobId],
  );
  expect(written).toEqual({ n: String(ROWS), rows: String(ROWS) });
});
