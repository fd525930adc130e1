import { mkdirSync } from "node:fs";
import { randomBytes, randomUUID } from "node:crypto";
import type { Page } from "@playwright/test";
import { transactionsCsv } from "./csv";
import { sql } from "./db";
import { expect, test } from "./fixtures";

const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1440, height: 900 };
/** Screenshots of every page at both widths, for people to look at; outside the repository. */
const SHOTS = process.env.BOUNDED_SHOTS_DIR ?? "test-results/shots";

/** Every link of the main navigation and where it leads. */
const NAV: [label: string, path: string][] = [
  ["Overview", "/"],
  ["Jobs", "/jobs"],
  ["Queues", "/queues"],
  ["Stuck", "/stuck"],
  ["Model calls", "/model-calls"],
  ["Limiter", "/limiter"],
  ["Reserves", "/reserves"],
  ["Budgets", "/budgets"],
  ["Database", "/database"],
  ["Audit", "/audit"],
];

/** How far the page is wider than the screen, and the widest elements that stick out, for the failure message. */
async function overflow(page: Page) {
  return page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const offenders = [...document.body.querySelectorAll<HTMLElement>("*")]
      .filter((el) => el.getBoundingClientRect().right > width + 0.5 && !el.closest(".table-wrap, .nav"))
      .slice(0, 5)
      .map(
        (el) =>
          `${el.tagName.toLowerCase()}.${[...el.classList].join(".")} right=${Math.round(el.getBoundingClientRect().right)}`,
      );
    return {
      body: document.body.scrollWidth - document.body.clientWidth,
      documentElement: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      offenders,
    };
  });
}

async function expectFits(page: Page, name: string) {
  await expect(page.locator("h1").first()).toBeVisible();
  const o = await overflow(page);
  expect(
    o,
    `${name} is wider than the ${page.viewportSize()?.width}px screen: ${o.offenders.join(", ")}`,
  ).toMatchObject({ body: 0, documentElement: 0 });
}

/** Whether every chart has drawn itself at the width of its box (charts measure their box after the first frame). */
async function chartsDrawn(page: Page): Promise<boolean> {
  return page.evaluate(() =>
    [...document.querySelectorAll<HTMLElement>(".recharts-wrapper")].every((chart) => {
      // The chart's own surface: a legend's icons are surfaces too.
      const surface = [...chart.querySelectorAll("svg.recharts-surface")].find(
        (s) => !s.closest(".recharts-legend-wrapper"),
      );
      const width = chart.getBoundingClientRect().width;
      return !!surface && width > 0 && Math.abs(surface.getBoundingClientRect().width - width) < 1;
    }),
  );
}

async function shoot(page: Page, name: string) {
  await expect.poll(() => chartsDrawn(page), { message: `the charts of ${name} drawn at their width` }).toBe(true);
  await page.screenshot({ path: `${SHOTS}/${name}-${page.viewportSize()?.width}.png`, fullPage: true });
}

test.describe.configure({ timeout: 240_000 });

test("every page fits a 390 px phone screen, wide tables scroll in their own box, and every page is drawn at 1440 px", async ({
  page,
  signIn,
}) => {
  mkdirSync(SHOTS, { recursive: true });
  // Data that makes the tables wide: an import with failed rows, and a job its worker left behind (the reaper resumes it).
  const { csv } = transactionsCsv(30, 4);
  const created = await page.request.post("/api/imports?tenant=e2e-small-screens-tenant-with-a-long-name", {
    data: csv,
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  const { jobId, progressToken } = (await created.json()) as { jobId: string; progressToken: string };
  const [tenant] = await sql<{ id: string }>(
    `INSERT INTO "Tenant" (id, slug) VALUES ($1, 'e2e-small-screens-reaped') ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug RETURNING id`,
    [randomUUID()],
  );
  await sql(
    `INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs", "budgetSource", "heartbeatAt", "attemptStartedAt", "progressToken", "updatedAt")
     VALUES ($1, 'csv_import', 'imports', $2, 'running', 120, 40, 2, 42, 1, 600000, 900000, 'default', now() - interval '1 hour', now() - interval '1 hour', $3, now())`,
    [randomUUID(), tenant!.id, randomBytes(16).toString("hex")],
  );
  await expect
    .poll(async () => (await sql<{ status: string }>(`SELECT status FROM "Job" WHERE id = $1`, [jobId]))[0]?.status, {
      timeout: 60_000,
    })
    .toMatch(/^completed/);

  const publicPages: [string, string][] = [
    ["login", "/login"],
    ["upload", "/upload"],
    ["documents", "/documents"],
    ["progress", `/progress/${progressToken}`],
  ];
  const operatorPages: [string, string][] = [
    ["overview", "/"],
    ["jobs", "/jobs"],
    ["job", `/jobs/${jobId}`],
    ["queues", "/queues"],
    ["stuck", "/stuck"],
    ["model-calls", "/model-calls"],
    ["limiter", "/limiter"],
    ["reserves", "/reserves"],
    ["budgets", "/budgets"],
    ["database", "/database"],
    ["audit", "/audit"],
  ];

  for (const [name, path] of publicPages) {
    await page.setViewportSize(PHONE);
    await page.goto(path);
    await expectFits(page, name);
    await shoot(page, name);
    await page.setViewportSize(DESKTOP);
    await shoot(page, name);
  }

  await signIn("operator");
  for (const [name, path] of operatorPages) {
    await page.setViewportSize(PHONE);
    await page.goto(path);
    await expectFits(page, name);
    // A wide table is scrolled inside its frame, never cut off: the frame is as wide as the page at most.
    for (const frame of await page.locator(".table-wrap").all()) {
      const box = await frame.evaluate((el) => ({
        right: el.getBoundingClientRect().right,
        scrolls: getComputedStyle(el).overflowX,
      }));
      expect(box.right).toBeLessThanOrEqual(PHONE.width);
      expect(["auto", "scroll"]).toContain(box.scrolls);
    }
    await shoot(page, name);
    await page.setViewportSize(DESKTOP);
    await expectFits(page, name);
    await shoot(page, name);
  }
  // The menu, open, at phone size.
  await page.setViewportSize(PHONE);
  await page.goto("/jobs");
  await page.getByRole("button", { name: /^Menu/ }).click();
  await shoot(page, "menu-open");
});

test.describe("on a touch screen", () => {
  test.use({ hasTouch: true, viewport: PHONE });

  test("at 390 px the menu button reaches every page, by touch and by keyboard", async ({ page, signIn }) => {
    await signIn("operator");
    const menu = page.getByRole("button", { name: /^Menu, current page:/ });
    const nav = page.getByRole("navigation", { name: "Main" });
    await expect(menu).toHaveAttribute("aria-expanded", "false");
    await expect(nav).toBeHidden();
    // The sign-out button lives in the menu on a phone.
    await expect(page.getByRole("button", { name: "Sign out" })).toBeHidden();

    for (const [label, path] of NAV) {
      await menu.click();
      await expect(menu).toHaveAttribute("aria-expanded", "true");
      await expect(page.getByRole("button", { name: "Sign out" })).toBeVisible();
      await nav.getByRole("link", { name: label, exact: true }).tap();
      await expect(page).toHaveURL(new RegExp(`${path === "/" ? "/" : path}$`));
      await expect(menu).toHaveAttribute("aria-expanded", "false");
      await expect(menu).toHaveAccessibleName(`Menu, current page: ${label}`);
      await expect(page.locator("h1").first()).toBeVisible();
      const o = await overflow(page);
      expect(o.body, `${path}: ${o.offenders.join(", ")}`).toBe(0);
    }

    // Keyboard: Enter opens, Tab walks the links, Escape closes and gives focus back, Enter follows a link.
    await menu.focus();
    await page.keyboard.press("Enter");
    await expect(nav).toBeVisible();
    await page.keyboard.press("Tab");
    await expect(nav.getByRole("link", { name: "Overview" })).toBeFocused();
    await page.keyboard.press("Escape");
    await expect(nav).toBeHidden();
    await expect(menu).toBeFocused();
    await page.keyboard.press("Enter");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Tab");
    await expect(nav.getByRole("link", { name: "Jobs", exact: true })).toBeFocused();
    await page.keyboard.press("Enter");
    await expect(page).toHaveURL(/\/jobs$/);
    await expect(menu).toHaveAccessibleName("Menu, current page: Jobs");
  });
});

test("at 1440 px every link is in the top bar and there is no menu button", async ({ page, signIn }) => {
  await page.setViewportSize(DESKTOP);
  await signIn("operator");
  await expect(page.getByRole("button", { name: /^Menu/ })).toBeHidden();
  const nav = page.getByRole("navigation", { name: "Main" });
  for (const [label] of NAV) await expect(nav.getByRole("link", { name: label, exact: true })).toBeVisible();
  await expect(page.getByRole("button", { name: "Sign out" })).toBeVisible();
});
