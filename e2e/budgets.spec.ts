import { E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

test("the budgets page shows each queue's budget with its source, and the live workers that really use it", async ({
  page,
  signIn,
}) => {
  await signIn("operator", { next: "/budgets" });
  await expect(page.getByRole("heading", { name: "Budgets", level: 1 })).toBeVisible();

  // The worker process publishes at start; the page is rendered per request, so reload until it shows.
  const workers = page.getByRole("table", { name: "Live workers" }).locator("tbody tr");
  await expect(async () => {
    await page.reload();
    await expect(workers).not.toHaveCount(0, { timeout: 1_000 });
  }).toPass({ timeout: 30_000 });
  await expect(page.getByText("No worker process is publishing its budgets")).toHaveCount(0);
  await expect(workers.first()).toContainText("imports");

  const budgets = page.getByRole("table", { name: "Effective budgets" });
  // Declared for the queue in code: the queue is named as the source, with its reason.
  const documents = budgets.locator('tr[data-queue="documents"]');
  await expect(documents.locator("[data-budget]")).toHaveText("30 min / 40 min");
  await expect(documents.locator("[data-source]")).toHaveText("queue:documents");
  await expect(documents).toContainText("95 documents at the medians");
  // Every queue of this environment declares or overrides its budget; the global default is the
  // last level of the precedence the page states (the default itself: lib/budgets/budgets.test.ts).
  await expect(page.getByText("global default (10 min / 15 min)")).toBeVisible();

  // Overridden in the environment (e2e/env.ts): the variables are named as the source.
  const imports = budgets.locator('tr[data-queue="imports"][data-kind="csv_import"]');
  await expect(imports.locator("[data-source]")).toHaveText(
    "env:BOUNDED_BUDGET_IMPORTS_SOFT_S,BOUNDED_BUDGET_IMPORTS_HARD_S",
  );
  await expect(imports.locator("[data-budget]")).toHaveText("≈55 h 33 min / 83 h 20 min");
  // The worker runs with the same environment as the web: what it uses matches the configuration.
  await expect(imports).toHaveAttribute("data-status", "ok");
  await expect(imports.getByText("matches")).toBeVisible();

  // Not 1 in the browser tests: the page says so.
  await expect(page.getByText(`BOUNDED_TIME_SCALE=${E2E_ENV.BOUNDED_TIME_SCALE}`)).toBeVisible();
  await page.screenshot({ path: "test-results/budgets.png", fullPage: true });
});

test("GET /api/budgets returns the same report to a viewer and refuses anonymous calls", async ({ request }) => {
  const anonymous = await request.get("/api/budgets");
  expect(anonymous.status()).toBe(401);
  expect((await anonymous.json()).error.code).toBe("unauthenticated");

  const ok = await request.get("/api/budgets", {
    headers: { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` },
  });
  expect(ok.status()).toBe(200);
  const report = await ok.json();
  const row = (queue: string) => report.rows.find((r: { queue: string }) => r.queue === queue);
  expect(row("documents").configuration).toMatchObject({
    softMs: 1_800_000,
    hardMs: 2_400_000,
    source: "queue:documents",
  });
  expect(row("imports").configuration).toMatchObject({
    softMs: 200_000_000,
    hardMs: 300_000_000,
    source: "env:BOUNDED_BUDGET_IMPORTS_SOFT_S,BOUNDED_BUDGET_IMPORTS_HARD_S",
  });
  expect(report.workers.length).toBeGreaterThan(0);
  expect(report.configurationProblems).toEqual([]);
});
