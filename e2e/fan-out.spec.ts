import { transactionsCsv } from "./csv";
import { sql as sqlOn } from "./db";
import { FANOUT_ENV, FANOUT_URL } from "./env";
import { expect, test } from "./fixtures";

// The system where a file outgrows one budget whatever the machine's speed (see FANOUT_ENV): a job
// projected not to fit splits itself at its start, with no operator, and its customer sees one job.
test.use({ baseURL: FANOUT_URL });
const sql = <T extends Record<string, unknown>>(text: string, params: unknown[] = []) =>
  sqlOn<T>(text, params, FANOUT_ENV.DATABASE_URL);

const ROWS = 250;
const OPEN = new Set(["queued", "running", "delayed"]);
const WIDTHS = [
  { name: "390", viewport: { width: 390, height: 844 } },
  { name: "1440", viewport: { width: 1440, height: 900 } },
] as const;

test("a file larger than one budget's worth splits itself, completes, and its progress page shows one job with an expected finish, never “timed out”", async ({
  page,
  signIn,
}) => {
  const { csv } = transactionsCsv(ROWS);
  await page.setViewportSize(WIDTHS[1].viewport);
  await page.goto("/upload");
  await page.getByLabel("Your account (tenant)").fill("e2e-fan-out");
  await page
    .getByLabel("Bank transactions (CSV)")
    .setInputFiles({ name: "year.csv", mimeType: "text/csv", buffer: Buffer.from(csv) });
  await page.getByRole("button", { name: "Upload and import" }).click();
  await page.waitForURL(/\/progress\/[0-9a-f]{32}$/);
  const token = page.url().split("/").pop()!;
  await expect(page.getByRole("heading", { name: "Importing year.csv" })).toBeVisible();

  // What the customer sees while it runs, read again and again without a reload.
  const badge = page.locator("[data-status]");
  const samples: { status: string; processed: number; timeLeft: string }[] = [];
  const sample = async () => {
    const s = {
      status: (await badge.getAttribute("data-status")) ?? "",
      processed: Number((await page.getByTestId("processed").textContent())!.replace(/,/g, "")),
      timeLeft: (await page.getByTestId("time-left").textContent()) ?? "",
    };
    samples.push(s);
    return s;
  };
  // An expected finish while it runs: from its projection at first, then from its own pace.
  await expect
    .poll(async () => (await sample()).timeLeft, { intervals: [200], timeout: 60_000 })
    .toMatch(/^about .+ left$/);
  await expect(page.getByTestId("expected-finish")).toHaveText(/^expected by /);
  await expect(page.getByTestId("rate")).toHaveText(/rows? (per|a) /);
  for (const { name, viewport } of WIDTHS) {
    await page.setViewportSize(viewport);
    await page.screenshot({ path: `test-results/fan-out-progress-running-${name}.png`, fullPage: true });
  }
  await expect.poll(async () => OPEN.has((await sample()).status), { intervals: [250], timeout: 110_000 }).toBe(false);
  await page.screenshot({ path: "test-results/fan-out-progress-end.png", fullPage: true });

  const history = samples.map((s) => `${s.status}:${s.processed}`).join(" ");
  expect(
    samples.some((s) => s.status === "timed_out"),
    history,
  ).toBe(false);
  for (let i = 1; i < samples.length; i++)
    expect(samples[i]!.processed, history).toBeGreaterThanOrEqual(samples[i - 1]!.processed);
  // One job for the customer: the whole file's count, and none of the operator's words.
  await expect(badge).toHaveAttribute("data-status", "completed");
  await expect(page.getByText(`${ROWS} of ${ROWS} rows read`)).toBeVisible();
  await expect(page.getByTestId("progress-percent")).toHaveText("100 %");
  await expect(page.locator("main")).not.toContainText(/\b(part|parts|split|p99|budget)\b/i);

  // The operator sees the job and the parts it became, each of which finished inside its budget.
  const [job] = await sql<{ id: string; status: string; processed: number }>(
    `select id, status::text, processed from "Job" where "progressToken" = $1`,
    [token],
  );
  expect(job).toMatchObject({ status: "completed", processed: ROWS });
  const parts = await sql<{ status: string; budgetSoftMs: number }>(
    `select status::text, "budgetSoftMs" from "Job" where "parentId" = $1 order by "createdAt"`,
    [job!.id],
  );
  expect(parts.length).toBeGreaterThanOrEqual(2);
  expect(parts.map((p) => p.status)).toEqual(parts.map(() => "completed"));
  expect(new Set(parts.map((p) => p.budgetSoftMs))).toEqual(new Set([600_000]));
  const [written] = await sql<{ n: string; rows: string }>(
    `select count(*) n, count(distinct row) rows from "Transaction" where "jobId" in (select id from "Job" where "parentId" = $1)`,
    [job!.id],
  );
  expect(written).toEqual({ n: String(ROWS), rows: String(ROWS) });

  await signIn("operator");
  await page.goto(`/jobs/${job!.id}`);
  await expect(page.getByRole("status")).toContainText(
    `Projected not to fit its budget, so it split itself into ${parts.length} parts, run one after another`,
  );
  await expect(page.getByRole("heading", { name: /^Parts/ })).toContainText(
    `${parts.length} of ${parts.length} completed`,
  );
  await expect(
    page.getByText(
      /^Projected not to fit its budget: 250 rows at ≈ .+; budget 10 min × 0\.7 → \d+ parts of ~\d+ rows, one after another\.$/,
    ),
  ).toBeVisible();
  await page.screenshot({ path: "test-results/fan-out-job.png", fullPage: true });
});
