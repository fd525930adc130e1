import { transactionsCsv } from "./csv";
import { sql as sqlOn } from "./db";
import { TIGHT_ENV, TIGHT_URL } from "./env";
import { expect, test } from "./fixtures";

// Against the tight-budget system: an import of 300 rows cannot finish in its 600 s budget.
test.use({ baseURL: TIGHT_URL });
const sql = <T extends Record<string, unknown>>(text: string, params: unknown[] = []) =>
  sqlOn<T>(text, params, TIGHT_ENV.DATABASE_URL);
const statusOf = async (jobId: string) =>
  (await sql<{ status: string }>(`select status::text from "Job" where id = $1`, [jobId]))[0]?.status;

/**
 * The split API test's import, uploaded before the first test starts: the two imports run out of
 * time side by side (each a tenant of its own, one row in flight each) instead of one after the other.
 */
let apiImport: string;
test.beforeAll(async ({ playwright }) => {
  const request = await playwright.request.newContext({ baseURL: TIGHT_URL });
  const created = await request.post("/api/imports?tenant=e2e-split-api", {
    data: transactionsCsv(300).csv,
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  apiImport = ((await created.json()) as { jobId: string }).jobId;
  await request.dispose();
});

test("an import that timed out is split from the job page, sized by what a row costs end to end; the parts complete, the job completes and the customer's page shows 100 %", async ({
  page,
  request,
  signIn,
}) => {
  const created = await request.post("/api/imports?tenant=e2e-split", {
    data: transactionsCsv(300).csv,
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  const { jobId, progressToken } = (await created.json()) as { jobId: string; progressToken: string };
  await expect.poll(() => statusOf(jobId), { timeout: 60_000 }).toBe("timed_out");
  const [timedOut] = await sql<{ cursor: number; message: string }>(`select cursor, message from "Job" where id = $1`, [
    jobId,
  ]);
  expect(timedOut!.cursor).toBeLessThan(300);
  expect(timedOut!.message).toMatch(/^Timed out after [\d,]+ of 300 rows \(budget 600 s\)/);

  await signIn("operator");

  await page.goto(`/jobs/${jobId}`);
  // The proposal with its arithmetic: the rows left at the projected rate (what a row really costs
  // here, end to end) plus the slowest row, against the budget × 0.7.
  const arithmetic = page.getByTestId("split-arithmetic");
  await expect(arithmetic).toHaveText(
    new RegExp(
      `^${300 - timedOut!.cursor} rows at ≈ .+ \\(items in flight\\)( \\+ .+ for the slowest)? ≈ .+; budget 10 min × 0\\.7 → (\\d+) parts of ~\\d+ rows, one after another`,
    ),
  );
  // Measured on this system when there was enough, else the kind's stated defaults.
  await expect(
    page.getByText(
      /^Figures: (measured from [\d,]+ rows and [\d,]+ calls in the last 7 days|defaults \(.+\): fewer than 100 rows measured)/,
    ),
  ).toBeVisible();
  const proposed = Number(/→ (\d+) parts/.exec((await arithmetic.textContent())!)![1]);
  expect(proposed).toBeGreaterThanOrEqual(2);
  await page.screenshot({ path: "test-results/job-split-plan.png", fullPage: true });
  // The operator may choose another k; the suggestion stays beside it. Parts run one after
  // another, each sized to fit its budget alone.
  const parts = proposed + 1;
  await page.getByLabel(/^Parts/).fill(String(parts));
  await page.getByRole("button", { name: "Recalculate" }).click();
  await expect(arithmetic).toContainText(`${proposed} parts suggested; you chose ${parts} parts of ~`);

  await page.getByRole("button", { name: `Split into ${parts} parts` }).click();
  await expect(page.getByRole("status")).toContainText(`Split into ${parts} parts`);

  await expect.poll(() => statusOf(jobId), { timeout: 90_000 }).toBe("completed");
  const children = await sql<{ status: string; n: string }>(
    `select status::text, count(*) n from "Job" where "parentId" = $1 group by status`,
    [jobId],
  );
  expect(children).toEqual([{ status: "completed", n: String(parts) }]);
  const [written] = await sql<{ n: string; rows: string }>(
    `select count(*) n, count(distinct row) rows from "Transaction" where "jobId" = $1 or "jobId" in (select id from "Job" where "parentId" = $1)`,
    [jobId],
  );
  expect(written).toEqual({ n: "300", rows: "300" });

  await page.goto(`/jobs/${jobId}`);
  await expect(page.getByRole("heading", { name: /^Parts/ })).toContainText(`${parts} of ${parts} completed`);
  await page.screenshot({ path: "test-results/job-after-split.png", fullPage: true });

  // The customer's original link: the whole file, done.
  await page.goto(`/progress/${progressToken}`);
  await expect(page.getByTestId("progress-percent")).toHaveText("100 %");
  await page.screenshot({ path: "test-results/progress-after-split.png", fullPage: true });
  const audit = await sql<{ actor: string; result: string }>(
    `select actor, result::text from "AuditEntry" where action = 'job.split' and target = $1`,
    [jobId],
  );
  expect(audit).toEqual([{ actor: "admin", result: "ok" }]);
});

test("the split API: the plan and the split for an operator, clear 4xx for everything else, nothing changed by a refused call", async ({
  request,
}) => {
  const operator = { authorization: `Bearer ${TIGHT_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
  const jobId = apiImport;
  await expect.poll(() => statusOf(jobId), { timeout: 60_000 }).toBe("timed_out");

  const plan = await request.get(`/api/jobs/${jobId}/split-plan?parts=3`, { headers: operator });
  expect(plan.status()).toBe(200);
  const body = (await plan.json()) as { parts: number; partSizes: number[]; remaining: number; arithmetic: string };
  expect(body.parts).toBe(3);
  expect(body.partSizes.reduce((a, b) => a + b)).toBe(body.remaining);
  expect(body.arithmetic).toMatch(/you chose 3 parts of ~\d+ rows/);

  for (const [data, status, code] of [
    [{ parts: 1 }, 422, "invalid_request"],
    [{ parts: 51 }, 422, "invalid_request"],
    [{ parts: "many" }, 422, "invalid_request"],
    [{ parts: 3, extra: true }, 422, "invalid_request"],
  ] as const) {
    const r = await request.post(`/api/jobs/${jobId}/split`, { data, headers: operator });
    expect(r.status(), JSON.stringify(data)).toBe(status);
    expect((await r.json()).error.code).toBe(code);
  }
  const badJson = await request.post(`/api/jobs/${jobId}/split`, {
    data: Buffer.from("{parts: 3"),
    headers: { ...operator, "content-type": "application/json" },
  });
  expect(badJson.status()).toBe(400);
  expect(
    (
      await request.post(`/api/jobs/00000000-0000-0000-0000-000000000000/split`, { data: {}, headers: operator })
    ).status(),
  ).toBe(404);
  expect(await statusOf(jobId)).toBe("timed_out");
  expect((await sql<{ n: string }>(`select count(*) n from "Job" where "parentId" = $1`, [jobId]))[0]!.n).toBe("0");

  // The proposal: parts sized from what a row costs here, one after another; the first is queued.
  const split = await request.post(`/api/jobs/${jobId}/split`, { data: {}, headers: operator });
  expect(split.status()).toBe(202);
  const { children, plan: made } = (await split.json()) as { children: unknown[]; plan: { parts: number } };
  expect(children).toHaveLength(1);
  expect(made.parts).toBeGreaterThanOrEqual(2);
  const again = await request.post(`/api/jobs/${jobId}/split`, { data: { parts: 3 }, headers: operator });
  expect(again.status()).toBe(409);
  expect((await again.json()).error).toEqual({
    code: "job_not_splittable",
    message: "This job cannot be split. This job was already split.",
  });
  // Its parts run one after another as the page's do (the test above follows those to the end).
  const started = await sql<{ n: string }>(`select count(*) n from "Job" where "parentId" = $1`, [jobId]);
  expect(Number(started[0]!.n)).toBeGreaterThanOrEqual(1);
});
