import { sql } from "./db";
import { E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

// Calls of this spec's own, under a queue name nobody else uses: the page is checked against
// numbers known here, whatever other specs (the import spec makes real model calls) recorded.
const QUEUE = `e2e-model-calls-${Date.now().toString(36)}`;
const MODEL_MS = [800, 1_200, 3_000, 4_000, 5_500, 5_500, 6_000, 7_000, 9_000, 42_000];
const MODEL_OUTCOMES = ["ok", "ok", "ok", "ok", "ok", "ok", "error", "ok", "ok", "aborted"];
const TOOL_MS = [12, 20, 25, 31, 48];

async function insertCalls(type: "model" | "tool", model: string, durations: number[], outcomes: string[]) {
  await sql(
    `INSERT INTO "ModelCall" ("queue", "jobKind", "model", "type", "startedAt", "durationMs", "outcome")
     SELECT $1, 'csv_import', $2, $3::"CallType", (now() AT TIME ZONE 'UTC') - interval '5 minutes', d, o::"ModelCallOutcome"
     FROM unnest($4::int[], $5::text[]) AS t(d, o)`,
    [QUEUE, model, type, durations, outcomes],
  );
}

test.beforeAll(async () => {
  await insertCalls("model", "e2e-model", MODEL_MS, MODEL_OUTCOMES);
  await insertCalls("tool", "lookup_invoice", TOOL_MS, TOOL_MS.map(() => "ok"));
});

test.afterAll(async () => {
  await sql(`DELETE FROM "ModelCall" WHERE "queue" = $1`, [QUEUE]);
  await sql(`DELETE FROM "ModelCallRollup" WHERE "queue" = $1`, [QUEUE]);
});

const WITH_UNIT = /^≈ \d+(\.\d)? (ms|s|min|h)$/;

test("the model-calls page draws the latency histogram with p50, p99 and max beside it", async ({ operatorPage: page }) => {
  await page.goto(`/model-calls?range=24h&queue=${QUEUE}`);
  await expect(page.getByRole("heading", { level: 1, name: "Model calls" })).toBeVisible();

  const chart = page.getByTestId("latency-chart");
  await expect(chart.locator(".recharts-bar-rectangle").first()).toBeVisible();
  expect(await chart.locator(".recharts-bar-rectangle").count()).toBeGreaterThan(3);
  for (const label of ["10 ms", "1 s", "10 s", "1 min", "1 h"]) await expect(chart.getByText(label, { exact: true })).toBeVisible();
  await expect(chart).toHaveAttribute("aria-label", /p50 ≈ .+ s, p99 ≈ .+, max 42 s/);

  const summary = page.getByTestId("model-summary");
  await expect(summary.locator('[data-stat="p50"]')).toHaveText(WITH_UNIT);
  await expect(summary.locator('[data-stat="p99"]')).toHaveText(WITH_UNIT);
  await expect(summary.locator('[data-stat="max"]')).toHaveText("42 s");
  await expect(summary.locator('[data-stat="total"]')).toHaveText("10");
  await expect(summary.locator('[data-outcome="error"]')).toHaveText("1 error");
  await expect(summary.locator('[data-outcome="aborted"]')).toHaveText("1 aborted");
  const tools = page.getByTestId("tool-summary");
  await expect(tools.locator('[data-stat="max"]')).toHaveText("48 ms");
  await expect(tools.locator('[data-stat="total"]')).toHaveText("5");
  await page.screenshot({ path: "test-results/model-calls.png", fullPage: true });

  // The hour-granular rollup says which window "1 h" really covers.
  await page.getByLabel("Range").selectOption("1h");
  await page.getByRole("button", { name: "Show" }).click();
  await expect(page).toHaveURL(/range=1h/);
  await expect(page.getByText(/Counted per hour: this covers the last two hour rows/)).toBeVisible();

  // Nothing matches: the page says what to do instead of drawing an empty chart.
  await page.goto(`/model-calls?range=1h&queue=${QUEUE}-none`);
  await expect(page.getByTestId("empty")).toContainText("No model calls in the last 1 h");
  await expect(page.getByTestId("empty").getByRole("link", { name: "upload a CSV" })).toBeVisible();
});

test("the histogram API is for viewers: 401 anonymous, 422 for an unknown range, the page's numbers otherwise", async ({ request }) => {
  const anonymous = await request.get("/api/model-calls/histogram");
  expect(anonymous.status()).toBe(401);
  expect((await anonymous.json()).error.code).toBe("unauthenticated");

  const auth = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
  const bad = await request.get("/api/model-calls/histogram?range=5y", { headers: auth });
  expect(bad.status()).toBe(422);
  const body = await bad.json();
  expect(body.error.code).toBe("invalid_request");
  expect(body.error.issues[0].path).toBe("range");

  const ok = await request.get(`/api/model-calls/histogram?range=24h&queue=${QUEUE}&kind=csv_import`, { headers: auth });
  expect(ok.status()).toBe(200);
  const h = await ok.json();
  expect(h.summary).toMatchObject({ total: 10, maxMs: 42_000, byOutcome: { ok: 8, error: 1, aborted: 1 } });
  expect(h.tools).toMatchObject({ total: 5, maxMs: 48 });
  expect(h.buckets).toHaveLength(34);
  expect(h.options.queues).toContain(QUEUE);
});
