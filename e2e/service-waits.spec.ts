import type { Page } from "@playwright/test";
import { Redis } from "ioredis";
import { transactionsCsv } from "./csv";
import { sql } from "./db";
import { E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

/**
 * What a job that waited for a silent model service shows, and a misconfigured model service on
 * the overview. The wait is written into the job's timeline as the worker's deferral writes it (a
 * `service_wait` event dated when the wait began, then the next attempt's start), and the breaker
 * into Redis as breaker.lua writes it, so no real outage is needed here:
 * workers/silent-model.integration.test.ts and workers/misconfigured-model.integration.test.ts make
 * them for real.
 */

const tag = Date.now().toString(36);
const TENANT = `e2e-service-waits-${tag}`;
const KEY = `${E2E_ENV.BOUNDED_REDIS_PREFIX}:breaker:model`;

async function shots(page: Page, name: string) {
  for (const width of [1440, 390]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 900 });
    await page.screenshot({ path: `test-results/${name}-${width}.png`, fullPage: true });
  }
  await page.setViewportSize({ width: 1440, height: 900 });
}

test("a job that waited for the model service says from when to when, on its page and on the customer's", async ({
  operatorPage: page,
  request,
}) => {
  const { csv } = transactionsCsv(20);
  const created = await request.post("/api/imports", {
    multipart: { tenant: TENANT, file: { name: `waits-${tag}.csv`, mimeType: "text/csv", buffer: Buffer.from(csv) } },
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

  // Attempt 1 waited for the model from 10:02:11 to 10:07:19 UTC; attempt 2 went on.
  await sql(
    `INSERT INTO "JobEvent" ("jobId", at, type, attempt, message) VALUES
       ($1::uuid, '2026-03-02T10:02:11Z', 'service_wait', 1, 'Waiting for the model service (not answering: 12 calls in flight, none answered for 41 s (its normal slowest answer is 35 s)); 41 s lost to it in this run is not charged to the budget.'),
       ($1::uuid, '2026-03-02T10:07:19Z', 'started', 2, 'Attempt 2 started (budget 600 s soft, 900 s hard, default)')`,
    [jobId],
  );

  await page.goto(`/jobs/${jobId}`);
  const wait = page.getByTestId("service-wait");
  await expect(wait).toHaveText(
    "Waited for the model service from 10:02:11 to 10:07:19 UTC (5 min 8 s). Not charged to its budget.",
  );
  await shots(page, "service-wait-job");

  const progress = (await (await request.get(`/api/progress/${progressToken}`)).json()) as {
    serviceWaits: { service: string; from: string; to: string; sentence: string }[];
  };
  expect(progress.serviceWaits).toEqual([
    {
      service: "model",
      serviceName: "the model service",
      from: "2026-03-02T10:02:11.000Z",
      to: "2026-03-02T10:07:19.000Z",
      sentence: "Waited for the model service from 10:02:11 to 10:07:19 UTC (5 min 8 s).",
    },
  ]);
  await page.goto(`/progress/${progressToken}`);
  await expect(page.getByTestId("service-wait")).toHaveText(
    "Waited for the model service from 10:02:11 to 10:07:19 UTC (5 min 8 s).",
  );
  await shots(page, "service-wait-progress");
});

test("a misconfigured model service is a red banner on the overview and the queues page that says so, in the provider's words, and what to fix", async ({
  operatorPage: page,
}) => {
  const redis = new Redis(E2E_ENV.REDIS_URL);
  try {
    const since = Date.now() - 60_000;
    const error =
      "misconfigured: HTTP 401: Incorrect API key provided: [key] (POST http://127.0.0.1:4110/v1/chat/completions, model bounded-sim-1)";
    // A probe far away: no worker call changes the state while the pages are looked at.
    await redis.hset(KEY, { state: "misconfigured", since, until: Date.now() + 10 * 60_000, error, prober: "" });
    for (const path of ["/", "/queues"]) {
      await page.goto(path);
      const banner = page.getByTestId("outside-services-down");
      await expect(banner).toContainText(/Model service misconfigured since \d\d:\d\d UTC \((\d+ s|1 min( \d+ s)?)\)/);
      await expect(banner).toContainText(
        "it refuses our configuration — HTTP 401: Incorrect API key provided: [key] (POST http://127.0.0.1:4110/v1/chat/completions, model bounded-sim-1); jobs are waiting, nothing is failed for it. Fix its configuration (MODEL_BASE_URL, MODEL_API_KEY, MODEL_NAME) and restart the workers: the next probe resumes every job by itself.",
      );
      await shots(page, `service-misconfigured${path === "/" ? "-overview" : "-queues"}`);
    }
  } finally {
    await redis.del(KEY);
    redis.disconnect();
  }
});
