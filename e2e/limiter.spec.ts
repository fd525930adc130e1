import { TIGHT_ENV, TIGHT_URL } from "./env";
import { expect, test } from "./fixtures";

// The system at time scale 0.02: a statistics window (60 s) is 1.2 s, far longer than a page's
// processing, so every page after the first waits in delayed — as in production. (At the main
// system's 0.0005 a window is shorter than a database commit, and a sync rarely has to wait.)
test.use({ baseURL: TIGHT_URL });

const operator = { authorization: `Bearer ${TIGHT_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };

test("a sync started through POST /api/syncs waits for its windows in delayed, says so to its customer, and /limiter shows its reschedules, its tenant and its bucket", async ({
  page,
  request,
  signIn,
}) => {
  const tenant = `e2e-limiter-${Date.now().toString(36)}`;
  const started = await request.post("/api/syncs", { headers: operator, data: { tenant, family: "statistics" } });
  expect(started.status()).toBe(201);
  const body = await started.json();
  expect(body).toMatchObject({ existing: false, progressUrl: `/progress/${body.progressToken}` });
  // The status as the row has it when answered: a free worker may have started it already.
  expect(["queued", "running", "delayed"]).toContain(body.status);

  // While it waits, a second start answers the same sync (one per tenant and family).
  await expect(async () =>
    expect((await (await request.get(`/api/progress/${body.progressToken}`)).json()).status).toBe("delayed"),
  ).toPass({ timeout: 30_000 });
  const again = await request.post("/api/syncs", { headers: operator, data: { tenant, family: "statistics" } });
  expect(again.status()).toBe(200);
  expect(await again.json()).toMatchObject({ jobId: body.jobId, existing: true });

  // The customer's page says what it waits for, in production seconds.
  await page.goto(body.progressUrl);
  await expect(page.getByTestId("message")).toHaveText(
    /^Waiting \d+ s for the marketplace's rate limit; it goes on by itself\.$/,
  );
  await page.screenshot({ path: "test-results/limiter-progress.png", fullPage: true });

  await expect(async () =>
    expect((await (await request.get(`/api/progress/${body.progressToken}`)).json()).status).toBe("completed"),
  ).toPass({ timeout: 60_000 });
  const progress = await (await request.get(`/api/progress/${body.progressToken}`)).json();
  expect(progress).toMatchObject({
    title: "Syncing statistics from the marketplace",
    noun: "page",
    processed: 10,
    total: 10,
  });

  // Bad input and callers without the operator role are refused.
  expect((await request.post("/api/syncs", { headers: operator, data: { tenant, family: "invoices" } })).status()).toBe(
    422,
  );
  expect((await request.post("/api/syncs", { data: { tenant, family: "statistics" } })).status()).toBe(401);

  await signIn("operator", { next: "/limiter" });
  await page.goto("/limiter?range=1h");
  await expect(page.getByRole("heading", { name: "Limiter", level: 1 })).toBeVisible();
  await expect(page.getByTestId("reschedules-total")).not.toHaveText("0");
  await expect(page.getByTestId("limiter-summary")).toContainText("marketplace-sync · statistics");
  await expect(page.getByTestId("reschedule-chart")).toBeVisible();
  await expect(page.getByTestId("top-tenants")).toContainText(tenant);
  await expect(page.getByTestId("bucket-specs")).toContainText("1 token1 per 60 s");
  // A bucket unused for one refill is full again and leaves Redis (its state is then "full"): the
  // tenant's own statistics bucket may be gone by now; the panel is there either way.
  await expect(page.getByRole("heading", { name: "Buckets in use now" })).toBeVisible();
  await page.screenshot({ path: "test-results/limiter.png", fullPage: true });

  const report = await (await request.get("/api/limiter?range=1h", { headers: operator })).json();
  expect(report.topTenants.find((t: { tenant: string }) => t.tenant === tenant)?.reschedules).toBeGreaterThanOrEqual(8);
  expect((await request.get("/api/limiter")).status()).toBe(401);
});

test("a live preview outside a job never waits a window out: the second statistics request of a tenant is a 429 with Retry-After", async ({
  request,
}) => {
  const tenant = `e2e-preview-${Date.now().toString(36)}`;
  const first = await request.get(`/api/marketplace/preview?tenant=${tenant}&family=statistics`, { headers: operator });
  expect(first.status()).toBe(200);
  expect((await first.json()).items).toHaveLength(20);
  const second = await request.get(`/api/marketplace/preview?tenant=${tenant}&family=statistics`, {
    headers: operator,
  });
  expect(second.status()).toBe(429);
  expect(Number(second.headers()["retry-after"])).toBeGreaterThanOrEqual(1);
  expect(await second.json()).toEqual({
    error: {
      code: "rate_limited",
      message: expect.stringMatching(
        new RegExp(`^The rate limit for statistics:${tenant} is used up; try again in \\d+ s\\.$`),
      ),
    },
  });
  // Another family has a bucket of its own; a bad family is a 422, not a 500.
  expect(
    (await request.get(`/api/marketplace/preview?tenant=${tenant}&family=orders`, { headers: operator })).status(),
  ).toBe(200);
  expect(
    (await request.get(`/api/marketplace/preview?tenant=${tenant}&family=invoices`, { headers: operator })).status(),
  ).toBe(422);
});
