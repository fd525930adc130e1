import { mkdirSync } from "node:fs";
import { randomBytes, randomUUID } from "node:crypto";
import type { Page, Request } from "@playwright/test";
import { sql } from "./db";
import { expect, test } from "./fixtures";

/** The refresh interval of a live page (LIVE_INTERVAL_MS in app/components/live-refresh.tsx). */
const INTERVAL_MS = 5_000;

/** Where the screenshots of the states go, for people to look at (as in small-screens.spec.ts). */
const SHOTS = process.env.BOUNDED_SHOTS_DIR ?? "test-results/shots";

const status = (page: Page) => page.getByTestId("live-status");
const updatedAt = async (page: Page) => Number(await status(page).getAttribute("data-updated-at"));

/** A tenant with no jobs yet: its filtered job list starts empty. */
async function newTenant(prefix: string): Promise<{ id: string; slug: string }> {
  const slug = `${prefix}-${randomBytes(4).toString("hex")}`;
  const [row] = await sql<{ id: string }>(`INSERT INTO "Tenant" (id, slug) VALUES ($1, $2) RETURNING id`, [
    randomUUID(),
    slug,
  ]);
  return { id: row!.id, slug };
}

/** A finished job written straight to the database, as a worker would have left it. */
async function insertCompletedJob(tenantId: string): Promise<string> {
  const id = randomUUID();
  await sql(
    `INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs", "budgetSource", "progressToken", "finishedAt", "updatedAt")
     VALUES ($1, 'csv_import', 'imports', $2, 'completed', 12, 12, 0, 12, 1, 600000, 900000, 'default', $3, now(), now())`,
    [id, tenantId, randomBytes(16).toString("hex")],
  );
  return id;
}

/** Requests that re-render the page: the router's refresh (an RSC request for the page itself) and its health check. */
function countRefreshes(page: Page, pathname: string) {
  const seen = { rsc: 0, health: 0 };
  const onRequest = (request: Request) => {
    const url = new URL(request.url());
    if (url.pathname === "/api/health") seen.health += 1;
    else if (url.pathname === pathname && request.headers().rsc === "1" && !request.headers()["next-router-prefetch"])
      seen.rsc += 1;
  };
  page.on("request", onRequest);
  return { seen, stop: () => page.off("request", onRequest) };
}

/** Refreshes of `pathname` sent and not yet answered (the router's RSC request and the health check). */
function refreshesInFlight(page: Page, pathname: string) {
  const open = new Set<Request>();
  const isRefresh = (request: Request) => {
    const url = new URL(request.url());
    return url.pathname === "/api/health" || (url.pathname === pathname && request.headers().rsc === "1");
  };
  const onRequest = (request: Request) => void (isRefresh(request) && open.add(request));
  const onDone = (request: Request) => void open.delete(request);
  page.on("request", onRequest);
  page.on("requestfinished", onDone);
  page.on("requestfailed", onDone);
  return {
    count: () => open.size,
    stop: () => {
      page.off("request", onRequest);
      page.off("requestfinished", onDone);
      page.off("requestfailed", onDone);
    },
  };
}

/** What a hidden tab reports: TanStack Query reads `document.visibilityState` on `visibilitychange`. */
async function setVisibility(page: Page, state: "hidden" | "visible") {
  await page.evaluate((s) => {
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => s });
    Object.defineProperty(document, "hidden", { configurable: true, get: () => s === "hidden" });
    // Bubbles, as the browser's own does: TanStack Query listens on window.
    document.dispatchEvent(new Event("visibilitychange", { bubbles: true }));
  }, state);
}

test("the jobs list shows a new job without a reload, the updated time advances, and what the operator typed stays", async ({
  operatorPage: page,
}) => {
  const tenant = await newTenant("e2e-live");
  await page.clock.install();
  await page.goto(`/jobs?tenant=${tenant.slug}`);
  await expect(page.getByText("No jobs match.")).toBeVisible();
  await expect(status(page)).toHaveAttribute("data-state", "live");
  await expect(status(page)).toContainText(/Updated \d\d:\d\d:\d\d UTC · live/);
  const first = await updatedAt(page);
  // A full page load would lose this; a refresh of the server components keeps it.
  await page.evaluate(() => ((window as unknown as { liveMarker: string }).liveMarker = "kept"));
  await page.getByLabel("Search").fill("typed while the page refreshes");
  const bulk = page.getByRole("region", { name: "Retry many jobs" });
  await bulk.getByLabel("Tenant").fill("typed into a client form");

  const id = await insertCompletedJob(tenant.id);
  await page.clock.fastForward(INTERVAL_MS);
  await expect(page.getByRole("link", { name: id.slice(0, 8) })).toBeVisible();
  await expect.poll(() => updatedAt(page)).toBeGreaterThan(first);
  expect(await page.evaluate(() => (window as unknown as { liveMarker?: string }).liveMarker)).toBe("kept");
  await expect(page.getByLabel("Search")).toHaveValue("typed while the page refreshes");
  await expect(bulk.getByLabel("Tenant")).toHaveValue("typed into a client form");
});

test("the overview's counts follow a job that finished elsewhere, without a reload", async ({ operatorPage: page }) => {
  // The overview's count of completed jobs, read from its stat card.
  await page.clock.install();
  await page.goto("/");
  const completed = page.locator('a[href="/jobs?status=completed"] .value');
  const before = Number((await completed.textContent())!.replace(/\D/g, ""));
  const tenant = await newTenant("e2e-live-overview");
  await insertCompletedJob(tenant.id);
  await page.clock.fastForward(INTERVAL_MS);
  await expect(completed).toHaveText((before + 1).toLocaleString("en-US"));
});

test("polling stops while the tab is hidden and resumes when it is shown again", async ({ operatorPage: page }) => {
  await page.clock.install();
  await page.goto("/stuck");
  const inFlight = refreshesInFlight(page, "/stuck");
  await expect(status(page)).toHaveAttribute("data-state", "live");
  // It polls while visible.
  const visible = countRefreshes(page, "/stuck");
  await page.clock.fastForward(INTERVAL_MS);
  await expect.poll(() => visible.seen.rsc).toBeGreaterThanOrEqual(1);
  visible.stop();

  await setVisibility(page, "hidden");
  await expect(status(page)).toHaveAttribute("data-state", "paused");
  await expect(status(page)).toContainText("paused while hidden");
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/live-paused.png` });
  // A refresh already under way when the tab was hidden finishes before counting starts.
  await expect.poll(inFlight.count, { message: "refreshes under way when the tab was hidden" }).toBe(0);
  inFlight.stop();
  const hidden = countRefreshes(page, "/stuck");
  // An absence: two and a half intervals of the page's clock, in which a polling page would have
  // refreshed twice, then a real second for any request they sent to reach this side.
  await page.clock.runFor(INTERVAL_MS * 2.5);
  await page.waitForTimeout(1_000);
  hidden.stop();
  expect(hidden.seen).toEqual({ rsc: 0, health: 0 });

  const shown = countRefreshes(page, "/stuck");
  await setVisibility(page, "visible");
  await expect(status(page)).toHaveAttribute("data-state", "live");
  // Back in view with data older than the interval: refreshed at once, not at the next tick.
  await expect.poll(() => shown.seen.rsc, { timeout: INTERVAL_MS - 1_000 }).toBeGreaterThanOrEqual(1);
  shown.stop();
});

test("a slow refresh is never joined by another, and a server that cannot be reached is said so while the old data stays", async ({
  operatorPage: page,
}) => {
  await page.clock.install();
  await page.goto("/stuck");
  await expect(page.getByRole("heading", { name: "Stuck jobs" })).toBeVisible();
  await expect(status(page)).toHaveAttribute("data-state", "live");

  // The page's render takes three intervals: only one refresh may be in flight meanwhile.
  let slow = 0;
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  await page.route(
    (url) => url.pathname === "/stuck",
    async (route) => {
      if (route.request().headers().rsc === "1" && !route.request().headers()["next-router-prefetch"]) {
        slow += 1;
        await held;
      }
      await route.continue();
    },
  );
  await page.clock.fastForward(INTERVAL_MS);
  await expect.poll(() => slow).toBe(1);
  // An absence: three intervals of the page's clock in which a page that joined refreshes would have
  // sent more, then a real second for any request they sent to reach the route.
  await page.clock.runFor(INTERVAL_MS * 3);
  await page.waitForTimeout(1_000);
  expect(slow).toBe(1);
  release();
  await page.unroute((url) => url.pathname === "/stuck");

  // PostgreSQL down: the health check says so, the page keeps what it showed.
  await page.route("**/api/health", (route) =>
    route.fulfill({
      status: 503,
      contentType: "application/json",
      body: JSON.stringify({ db: "down", redis: "ok", workers: 1 }),
    }),
  );
  await page.clock.fastForward(INTERVAL_MS);
  await expect(status(page)).toHaveAttribute("data-state", "error");
  await expect(status(page)).toContainText(
    /Could not refresh: PostgreSQL is down\. Showing data from \d\d:\d\d:\d\d UTC; retrying every 5 s\./,
  );
  await expect(page.getByRole("heading", { name: "Stuck jobs" })).toBeVisible();
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/live-error.png` });
  await page.unroute("**/api/health");

  // The web server gone altogether.
  await page.route("**/api/health", (route) => route.abort("connectionrefused"));
  await page.clock.fastForward(INTERVAL_MS);
  await expect(status(page)).toContainText("Could not refresh: the server cannot be reached");
  await expect(page.getByRole("heading", { name: "Stuck jobs" })).toBeVisible();
  await page.unroute("**/api/health");

  // Back: live again, without a reload.
  await page.clock.fastForward(INTERVAL_MS);
  await expect(status(page)).toHaveAttribute("data-state", "live");
});

test("pages that are read as a record, not watched, do not poll", async ({ operatorPage: page }) => {
  for (const path of ["/budgets", "/audit", "/database"]) {
    await page.goto(path);
    await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
    await expect(status(page)).toHaveCount(0);
  }
});
