import { randomBytes, randomUUID } from "node:crypto";
import { sql } from "./db";
import { formatDuration } from "../lib/format/duration";
import { E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

// Calls of this spec's own, under a queue name nobody else uses: the page is checked against
// numbers known here, whatever other specs (the import spec makes real model calls) recorded.
const QUEUE = `e2e-model-calls-${Date.now().toString(36)}`;
const MODEL_MS = [800, 1_200, 3_000, 4_000, 5_500, 5_500, 6_000, 7_000, 9_000, 42_000];
// One of each: a failure, a call its job cut, a hedged request cancelled when its twin answered first.
const MODEL_OUTCOMES = ["ok", "ok", "ok", "ok", "ok", "ok", "error", "superseded", "ok", "aborted"];
const TOOL_MS = [12, 20, 25, 31, 48];
// Rows hold durations as recorded at the system's time scale; the page and the API show production
// time (recorded ÷ scale), the unit of the budgets they are drawn against.
const SCALE = Number(E2E_ENV.BOUNDED_TIME_SCALE);
const shown = (recordedMs: number) => formatDuration(recordedMs / SCALE);

// The job (and tenant) the calls were made for, so the token tables name them.
const TENANT = { id: randomUUID(), slug: `${QUEUE}-tenant` };
const JOB_ID = randomUUID();

async function insertCalls(type: "model" | "tool", model: string, durations: number[], outcomes: string[]) {
  // A model call that answered carries the tokens the endpoint counted: 1,250 prompt + 300 completion.
  await sql(
    `INSERT INTO "ModelCall" ("queue", "jobKind", "jobId", "model", "type", "startedAt", "durationMs", "outcome", "promptTokens", "completionTokens")
     SELECT $1, 'csv_import', $6::uuid, $2, $3::"CallType", (now() AT TIME ZONE 'UTC') - interval '5 minutes', d, o::"ModelCallOutcome",
            CASE WHEN $3 = 'model' AND o = 'ok' THEN 1250 END, CASE WHEN $3 = 'model' AND o = 'ok' THEN 300 END
     FROM unnest($4::int[], $5::text[]) AS t(d, o)`,
    [QUEUE, model, type, durations, outcomes, JOB_ID],
  );
}

test.beforeAll(async () => {
  await sql(`INSERT INTO "Tenant" (id, slug) VALUES ($1, $2)`, [TENANT.id, TENANT.slug]);
  await sql(
    `INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs", "budgetSource", "progressToken", "finishedAt", "updatedAt")
     VALUES ($1, 'csv_import', 'imports', $2, 'completed', 8, 8, 0, 8, 1, 600000, 900000, 'default', $3, now(), now())`,
    [JOB_ID, TENANT.id, randomBytes(16).toString("hex")],
  );
  // The simulator's model, which the default BOUNDED_MODEL_PRICES prices (0.15 / 0.6 USD per million).
  await insertCalls("model", "bounded-sim-1", MODEL_MS, MODEL_OUTCOMES);
  await insertCalls(
    "tool",
    "lookup_invoice",
    TOOL_MS,
    TOOL_MS.map(() => "ok"),
  );
});

test.afterAll(async () => {
  await sql(`DELETE FROM "ModelCall" WHERE "queue" = $1`, [QUEUE]);
  await sql(`DELETE FROM "ModelCallRollup" WHERE "queue" = $1`, [QUEUE]);
  await sql(`DELETE FROM "Job" WHERE id = $1`, [JOB_ID]);
  await sql(`DELETE FROM "Tenant" WHERE id = $1`, [TENANT.id]);
});

const WITH_UNIT = /^≈ \d+(\.\d)? (ms|s|min|h)( \d+ (s|min))?$/;

test("the model-calls page draws the latency histogram with p50, p99 and max beside it", async ({
  operatorPage: page,
}) => {
  await page.goto(`/model-calls?range=24h&queue=${QUEUE}`);
  await expect(page.getByRole("heading", { level: 1, name: "Model calls" })).toBeVisible();

  const chart = page.getByTestId("latency-chart");
  await expect(chart.locator(".recharts-bar-rectangle").first()).toBeVisible();
  expect(await chart.locator(".recharts-bar-rectangle").count()).toBeGreaterThan(3);
  // The axis is labelled in production time: at scale 0.0005 its 10 ms – 1 h of recorded time starts at 20 s.
  for (const label of ["1 min", "10 min", "1 h"]) await expect(chart.getByText(label, { exact: true })).toBeVisible();
  await expect(chart.getByText("1 s", { exact: true })).toHaveCount(0);
  await expect(chart).toHaveAttribute("aria-label", new RegExp(`p50 ≈ .+, p99 ≈ .+, max ${shown(42_000)}\\.`));

  const summary = page.getByTestId("model-summary");
  await expect(summary.locator('[data-stat="p50"]')).toHaveText(WITH_UNIT);
  await expect(summary.locator('[data-stat="p99"]')).toHaveText(WITH_UNIT);
  await expect(summary.locator('[data-stat="max"]')).toHaveText(shown(42_000));
  await expect(summary.locator('[data-stat="total"]')).toHaveText("10");
  await expect(summary.locator('[data-outcome="error"]')).toHaveText("1 error");
  await expect(summary.locator('[data-outcome="aborted"]')).toHaveText("1 aborted");
  await expect(summary.locator('[data-outcome="superseded"]')).toHaveText("1 superseded");
  await expect(summary.getByTestId("superseded-note")).toContainText("Not a failure");
  const tools = page.getByTestId("tool-summary");
  await expect(tools.locator('[data-stat="max"]')).toHaveText(shown(48));
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

  // The list of the calls: the hedge's twin in grey, beside a failure and a call its job cut.
  await page.goto(`/model-calls/calls?queue=${QUEUE}&type=model`);
  // Not one bucket's calls: the heading does not say so.
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Calls");
  const listed = page.locator("tr[data-outcome]");
  await expect(listed).toHaveCount(MODEL_MS.length);
  await expect(page.locator('tr[data-outcome="superseded"] .badge.idle')).toHaveText("superseded");
  await expect(page.locator('tr[data-outcome="error"] .badge.bad')).toHaveText("error");
  await page.screenshot({ path: "test-results/model-calls-list.png", fullPage: true });
});

test("the model-calls page shows the tokens and estimated cost per kind and tenant", async ({ operatorPage: page }) => {
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`/model-calls?range=24h&queue=${QUEUE}`);
  const usage = page.getByTestId("token-usage");
  // 7 answered calls × (1,250 + 300) tokens; 7 × (1,250 × 0.15 + 300 × 0.6) / 1e6 USD ≈ $0.003.
  await expect(usage.getByTestId("token-summary")).toContainText(
    "10,850 tokens (8,750 prompt, 2,100 completion) in 7 calls, estimated $0.003",
  );
  await expect(usage.getByTestId("tokens-by-kind").getByRole("row", { name: /csv_import/ })).toContainText(
    /10,850 tokens\s*\$0\.003/,
  );
  await expect(usage.getByTestId("tokens-by-tenant").getByRole("row", { name: TENANT.slug })).toContainText(
    "10,850 tokens",
  );
  await page.screenshot({ path: "test-results/model-calls-tokens.png", fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: "test-results/model-calls-tokens-390.png", fullPage: true });

  // The job's own totals, one click away.
  await usage
    .getByTestId("tokens-by-job")
    .getByRole("link", { name: JOB_ID.slice(0, 8) })
    .click();
  await expect(page.getByTestId("job-tokens")).toHaveText("10,850 tokens, estimated $0.003");
  // Its calls: the hedge's cancelled twin is counted apart, not among the errors.
  await expect(page.getByTestId("forensics-summary")).toContainText(
    "1 error, 1 aborted, 1 superseded (sent twice, the other answered)",
  );
  await page.screenshot({ path: "test-results/job-tokens-390.png", fullPage: true });
});

test("the model providers: each with its model, endpoint, state and limits, the routes, and the tokens per model", async ({
  operatorPage: page,
}) => {
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`/model-calls?range=24h&queue=${QUEUE}`);
  const providers = page.getByTestId("model-providers");
  const list = providers.getByTestId("model-provider-list");
  await expect(list.getByRole("row", { name: /^primary/ })).toContainText(
    /bounded-sim-1\s*http:\/\/127\.0\.0\.1:4110\s*answering\s*32\s*30\s*learnt from its headers/,
  );
  await expect(list.getByRole("row", { name: /^backup/ })).toContainText(
    /bounded-sim-backup-1\s*http:\/\/127\.0\.0\.1:4110\s*answering\s*8\s*5\s*learnt from its headers/,
  );
  // No kind has a route of its own here: every kind's calls go to the primary alone.
  await expect(providers.getByTestId("model-routes")).toHaveText("Routes: every kind: primary.");
  await expect(providers.getByTestId("failover-ceiling")).toHaveText(
    "Failover cost: no ceiling (BOUNDED_FAILOVER_MAX_USD_PER_JOB, _PER_TENANT_DAY).",
  );
  // A provider's model opens its latency: the chart filtered by that model.
  await list.getByRole("link", { name: "bounded-sim-1" }).click();
  await expect(page).toHaveURL(/model=bounded-sim-1/);
  await page.goto(`/model-calls?range=24h&queue=${QUEUE}`);
  await expect(page.getByTestId("tokens-by-model").getByRole("row", { name: /bounded-sim-1/ })).toContainText(
    /10,850 tokens\s*\$0\.003/,
  );
  await providers.screenshot({ path: "test-results/model-providers.png" });
  await page.setViewportSize({ width: 390, height: 844 });
  await providers.screenshot({ path: "test-results/model-providers-390.png" });
});

test("the histogram API is for viewers: 401 anonymous, 422 for an unknown range, the page's numbers otherwise", async ({
  request,
}) => {
  const anonymous = await request.get("/api/model-calls/histogram");
  expect(anonymous.status()).toBe(401);
  expect((await anonymous.json()).error.code).toBe("unauthenticated");

  const auth = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
  const bad = await request.get("/api/model-calls/histogram?range=5y", { headers: auth });
  expect(bad.status()).toBe(422);
  const body = await bad.json();
  expect(body.error.code).toBe("invalid_request");
  expect(body.error.issues[0].path).toBe("range");

  const ok = await request.get(`/api/model-calls/histogram?range=24h&queue=${QUEUE}&kind=csv_import`, {
    headers: auth,
  });
  expect(ok.status()).toBe(200);
  const h = await ok.json();
  expect(h.summary).toMatchObject({
    total: 10,
    maxMs: 42_000 / SCALE,
    byOutcome: { ok: 7, error: 1, aborted: 1, superseded: 1 },
  });
  expect(h.tools).toMatchObject({ total: 5, maxMs: 48 / SCALE });
  expect(h.buckets).toHaveLength(34);
  expect(h.options.queues).toContain(QUEUE);
});

test("the call allowance: the line on /model-calls, its sentence, the API and bounded_call_allowance_seconds agree, and it is a call's, not a row's", async ({
  operatorPage: page,
  request,
}) => {
  const auth = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
  const api = await request.get("/api/model-calls/histogram?range=24h&queue=imports&kind=csv_import", {
    headers: auth,
  });
  expect(api.status()).toBe(200);
  const a = (await api.json()).callAllowance;
  // Rows go eight to a call, and a job's calls go side by side: the budget over the rounds of calls, not over the rows.
  expect(a).toMatchObject({ queue: "imports", itemsPerCall: 8 });
  expect(a.callsPerJob).toBe(Math.ceil(a.medianItems / 8));
  expect(a.rounds).toBe(Math.ceil(a.callsPerJob / a.callsAtOnce));
  expect(a.allowanceMs).toBe(Math.round(a.softMs / a.rounds));
  expect(a.allowanceMs).toBeGreaterThan(a.softMs / a.medianItems);

  // The gauge the latency alert compares against (recomputed at most once a minute, so only its shape is checked here).
  const metrics = await (await request.get("/api/metrics?sources=web")).text();
  const gauge = /^bounded_call_allowance_seconds\{[^}]*queue="imports"[^}]*kind="csv_import"[^}]*\} (\S+)$/m.exec(
    metrics,
  );
  expect(Number(gauge?.[1])).toBeGreaterThan(0);
  expect(Number(gauge?.[1])).toBeLessThanOrEqual(a.softMs / 1000);

  // A call of the kind on its queue, so the chart (and the line on it) is drawn whatever other specs ran.
  const model = `${QUEUE}-allowance`;
  await sql(
    `INSERT INTO "ModelCall" ("queue", "jobKind", "jobId", "model", "type", "startedAt", "durationMs", "outcome")
     VALUES ('imports', 'csv_import', $1::uuid, $2, 'model', (now() AT TIME ZONE 'UTC') - interval '5 minutes', 5000, 'ok')`,
    [JOB_ID, model],
  );
  try {
    await page.goto(`/model-calls?range=24h&queue=imports&kind=csv_import&model=${model}`);
    const note = page.getByTestId("call-allowance");
    await expect(note).toContainText(`Call allowance ${formatDuration(a.allowanceMs)}`);
    await expect(note).toContainText(a.rounds === 1 ? "in one round" : `in ${a.rounds} rounds`);
    await expect(
      page.getByTestId("latency-chart").getByText(`call allowance ${formatDuration(a.allowanceMs)}`),
    ).toBeVisible();
    await page.screenshot({ path: "test-results/model-calls-allowance.png", fullPage: true });
  } finally {
    await sql(`DELETE FROM "ModelCall" WHERE model = $1`, [model]);
    await sql(`DELETE FROM "ModelCallRollup" WHERE model = $1`, [model]);
    await sql(`DELETE FROM "ModelCallRollupDay" WHERE model = $1`, [model]);
    await sql(`DELETE FROM "ModelCallRollupWeek" WHERE model = $1`, [model]);
  }
});
