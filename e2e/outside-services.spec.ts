import { Redis } from "ioredis";
import { E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

/**
 * An outside service that is down shows in red on / and /queues — since when, why, and that jobs
 * wait rather than fail — and nothing shows while every service is up. The breaker's state is
 * written into Redis as the workers' breaker writes it (lib/ratelimit/breaker.lua), so no real
 * outage is needed here; breaker.integration.test.ts and csv-import-outage.integration.test.ts
 * cover how it opens and closes.
 */

const KEY = `${E2E_ENV.BOUNDED_REDIS_PREFIX}:breaker:model`;

test("a model service outage is a red banner on the overview and the queues page, gone when it is back", async ({
  operatorPage: page,
}) => {
  const redis = new Redis(E2E_ENV.REDIS_URL);
  try {
    const since = Date.now() - 2 * 60_000 - 5_000;
    // A probe far away: no worker call changes the state while the pages are looked at.
    await redis.hset(KEY, {
      state: "open",
      failures: 3,
      windowStart: since,
      since,
      until: Date.now() + 10 * 60_000,
      error: "Error: connect ECONNREFUSED 127.0.0.1:4110 (ECONNREFUSED)",
    });
    const hhmm = new Date(since).toISOString().slice(11, 16);

    for (const path of ["/", "/queues"]) {
      for (const width of [1440, 390]) {
        await page.setViewportSize({ width, height: 900 });
        await page.goto(path);
        const banner = page.getByTestId("outside-services-down");
        await expect(banner).toContainText(new RegExp(`Model service down since ${hhmm} UTC \\(2 min( \\d+ s)?\\)`));
        await expect(banner).toContainText("connection refused; jobs are waiting, nothing is failed for it.");
        await expect(banner.getByRole("alert")).toHaveCSS("color", "rgb(180, 35, 24)");
        await page.screenshot({
          path: `test-results/outside-service-down${path === "/" ? "-overview" : "-queues"}-${width}.png`,
          fullPage: true,
        });
      }
    }
    await expect(page.getByTestId("outside-services-down")).toBeVisible();

    await redis.del(KEY);
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto("/");
    await expect(page.getByRole("heading", { name: "Overview", exact: true })).toBeVisible();
    await expect(page.getByTestId("outside-services-down")).toHaveCount(0);
    await expect(page.getByTestId("recent-failures")).toHaveText(/^[\d,]+ items?$/);
    // Red only for a job that ended badly: items failed for their own input are not an alarm, and
    // the card links to the jobs that hold them.
    const failures = page.locator("a.stat", { has: page.getByTestId("recent-failures") });
    if ((await failures.getByText("no job ended failed").count()) > 0) {
      await expect(failures).not.toHaveClass(/\balert\b/);
      await expect(failures).toHaveAttribute("href", "/jobs?status=completed_with_errors");
    } else {
      await expect(failures).toHaveClass(/\balert\b/);
      await expect(failures).toHaveAttribute("href", "/jobs?status=failed");
    }
  } finally {
    await redis.del(KEY);
    redis.disconnect();
  }
});
