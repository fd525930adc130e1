import { randomBytes, randomUUID } from "node:crypto";
import { Queue } from "bullmq";
import { sql } from "./db";
import { E2E_ENV } from "./env";
import { axeViolations } from "./axe";
import { expect, test } from "./fixtures";

/**
 * An open row the reaper leaves alone, with a queue job held an hour in *delayed* (so the queue
 * has it and no worker takes it): `running` with an old heartbeat and a 10-hour hard limit
 * (heartbeat lost), or `queued` for 10 minutes with a 10-minute soft budget (a late start: 20 h of
 * production time at the e2e scale; the hard limit, ≈17 min here, is not reached).
 */
async function openRow(tenantSlug: string, status: "running" | "queued", queue: Queue): Promise<string> {
  const id = randomUUID();
  const [tenant] = await sql<{ id: string }>(
    `INSERT INTO "Tenant" (id, slug) VALUES ($1, $2) ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug RETURNING id`,
    [randomUUID(), tenantSlug],
  );
  await sql(
    `INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs", "budgetSource", "heartbeatAt", "attemptStartedAt", "createdAt", "progressToken", "updatedAt")
     VALUES ($1, 'csv_import', 'imports', $2, $3, 120, 40, 2, 42, $4, 600000, 2000000000, 'operator:e2e', $5, $5, now() - interval '10 minutes', $6, now())`,
    [
      id,
      tenant!.id,
      status,
      status === "running" ? 1 : 0,
      status === "running" ? new Date(Date.now() - 60_000) : null,
      randomBytes(16).toString("hex"),
    ],
  );
  await queue.add("csv_import", { jobId: id }, { jobId: id, delay: 3_600_000 });
  return id;
}

/**
 * A job that ended for a cause of its own and waits on a person (lib/diagnosis/resume-policy.ts), as
 * its finalizer leaves it: an interactive agent run that ran out of its minute (a kind that cannot
 * split), or an import whose worker died more often than the bound of resumes. Created 30 days
 * and ended 20 days ago in production time, the page's units (at the e2e time scale a real second
 * is over half an hour: ages that large barely move while the test looks).
 */
async function awaitingOperator(tenantSlug: string, kind: "agent_run" | "csv_import"): Promise<string> {
  const id = randomUUID();
  const [tenant] = await sql<{ id: string }>(
    `INSERT INTO "Tenant" (id, slug) VALUES ($1, $2) ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug RETURNING id`,
    [randomUUID(), tenantSlug],
  );
  const [queue, status, message, total] =
    kind === "agent_run"
      ? ([
          "agent-interactive",
          "timed_out",
          "Timed out after 3 of 40 steps (budget 60 s). Retry with a larger budget or give the agent a smaller task.",
          40,
        ] as const)
      : ([
          "imports",
          "failed",
          "Stopped after its worker died 4 times while running it; 42 of 120 rows were done. Retry to continue.",
          120,
        ] as const);
  const ago = (productionMinutes: number) =>
    new Date(Date.now() - productionMinutes * 60_000 * Number(E2E_ENV.BOUNDED_TIME_SCALE));
  await sql(
    `INSERT INTO "Job" (id, kind, queue, "tenantId", status, total, processed, failed, cursor, attempt, "budgetSoftMs", "budgetHardMs", "budgetSource", "heartbeatAt", "attemptStartedAt", "createdAt", "finishedAt", message, "progressToken", "updatedAt")
     VALUES ($1, $2, $3, $4, $5::"JobStatus", $6, 3, 0, 3, 1, 60000, 90000, 'default', $9, $9, $10, $9, $7, $8, now())`,
    [
      id,
      kind,
      queue,
      tenant!.id,
      status,
      total,
      message,
      randomBytes(16).toString("hex"),
      ago(DAY * 20),
      ago(DAY * 30),
    ],
  );
  await sql(`INSERT INTO "JobEvent" ("jobId", type, attempt, message, at) VALUES ($1, $2, 1, $3, $4)`, [
    id,
    status,
    message,
    ago(DAY * 20),
  ]);
  return id;
}

/** Minutes in a day. */
const DAY = 24 * 60;
/** Whole hours in a cell such as "723 h 5 min". */
const hoursIn = (text: string) => Number(/^(\d+) h( \d+ min)?$/.exec(text)?.[1]);

const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };

test("jobs awaiting an operator come first, with their cause, the customer's wait and the action; a bulk retry takes them out without a reload", async ({
  operatorPage: page,
  request,
}) => {
  const id = await awaitingOperator("e2e-stuck-retry", "agent_run");
  // The retried run stays queued while the test looks: its queue is paused meanwhile.
  expect((await request.post("/api/queues/agent-interactive/pause", { headers: operator, data: {} })).status()).toBe(
    200,
  );
  try {
    await page.goto("/stuck");
    await expect(page.getByRole("heading", { name: "Stuck jobs" })).toBeVisible();
    const group = page.getByTestId("group-awaiting_operator");
    await expect(page.locator("section[data-testid^=group-]").first()).toHaveAttribute(
      "data-testid",
      "group-awaiting_operator",
    );
    await expect(group.getByRole("heading", { name: /^Awaiting an operator \(\d+\)$/ })).toBeVisible();
    const row = group.locator(`tr[data-job="${id}"]`);
    await expect(row).toContainText("agent_run · e2e-stuck-retry");
    await expect(row).toContainText("Too big for its budget (this kind cannot split)");
    await expect(row.getByTestId("action")).toHaveText("Retry with a larger budget");
    await expect(row.getByRole("link", { name: "Retry with a larger budget" })).toHaveAttribute("href", `/jobs/${id}`);
    // The customer's wait so far (since they sent it) and ours (since it ended), in production units.
    const customerWait = hoursIn(await row.getByTestId("customer-wait").innerText());
    const ourWait = hoursIn(await row.getByTestId("our-wait").innerText());
    expect(customerWait).toBeGreaterThanOrEqual(720);
    expect(customerWait).toBeLessThan(800);
    expect(ourWait).toBeGreaterThanOrEqual(480);
    expect(ourWait).toBeLessThan(560);
    const awaitingOnStuck = Number(
      (await page.getByTestId("awaiting-operator").innerText()).match(/\d[\d,]*/)![0].replace(/,/g, ""),
    );
    expect(awaitingOnStuck).toBeGreaterThanOrEqual(1);
    // The overview says what the stuck page says: never "Nothing stuck" beside a job awaiting a person.
    await page.goto("/");
    const onOverview = (await page.getByTestId("overview-stuck").innerText()).match(/^[\d,]+ \/ ([\d,]+)$/);
    expect(Number(onOverview?.[1]?.replace(/,/g, ""))).toBeGreaterThanOrEqual(1);
    await expect(page.getByText(/Nothing stuck/)).toHaveCount(0);
    await expect(page.getByText(/awaiting an operator\./).first()).toBeVisible();
    await page.goto("/stuck");

    // Marked before the action: a full reload would lose it.
    await page.evaluate(() => ((window as unknown as { stillHere: boolean }).stillHere = true));
    const count = Number((await page.getByTestId("count-awaiting_operator").innerText()).replace(/[(),]/g, ""));
    const jobs = `${count.toLocaleString("en-US")} job${count === 1 ? "" : "s"}`;
    await group.getByRole("button", { name: `Retry ${jobs}…` }).click();
    await expect(
      group.getByText(`Retry ${jobs}? Each resumes from where it stopped, with its usual budget.`),
    ).toBeVisible();
    expect((await sql<{ status: string }>(`SELECT status FROM "Job" WHERE id = $1`, [id]))[0]?.status).toBe(
      "timed_out",
    );
    await group.getByRole("button", { name: `Confirm: retry ${jobs}` }).click();

    await expect(page.getByRole("status").filter({ hasText: /^Retried \d+ of / })).toBeVisible();
    await expect(page.locator(`[data-testid="group-awaiting_operator"] tr[data-job="${id}"]`)).toHaveCount(0);
    expect(await page.evaluate(() => (window as unknown as { stillHere?: boolean }).stillHere)).toBe(true);
    expect((await sql<{ status: string }>(`SELECT status FROM "Job" WHERE id = $1`, [id]))[0]?.status).toBe("queued");
    const [audit] = await sql<{ action: string; result: string; target: string }>(
      `SELECT action, result, target FROM "AuditEntry" WHERE action = 'stuck.retry' ORDER BY id DESC LIMIT 1`,
    );
    expect(audit).toMatchObject({ action: "stuck.retry", result: "ok", target: "awaiting_operator" });
  } finally {
    await request.post("/api/queues/agent-interactive/resume", { headers: operator, data: {} });
  }
});

test("marking a group failed ends its jobs; marking jobs awaiting an operator handled takes them out; the page at 1440 px and 390 px, with nothing axe-core finds", async ({
  operatorPage: page,
}) => {
  const queue = new Queue("imports", {
    connection: { host: "127.0.0.1", port: 6379 },
    prefix: E2E_ENV.BOUNDED_REDIS_PREFIX,
  });
  const ids: string[] = [];
  try {
    const waiting = [
      await awaitingOperator("e2e-stuck-look", "agent_run"),
      await awaitingOperator("e2e-stuck-look", "csv_import"),
    ];
    const silent = await openRow("e2e-stuck-look", "running", queue);
    const late = await openRow("e2e-stuck-look", "queued", queue);
    ids.push(silent, late);
    for (const [name, width, height] of [
      ["desktop", 1440, 1000],
      ["phone", 390, 844],
    ] as const) {
      await page.setViewportSize({ width, height });
      await page.goto("/stuck");
      await expect(page.getByTestId("group-heartbeat_lost").locator(`tr[data-job="${silent}"]`)).toBeVisible();
      await expect(page.getByTestId("group-late_start").locator(`tr[data-job="${late}"]`)).toBeVisible();
      for (const id of waiting)
        await expect(page.getByTestId("group-awaiting_operator").locator(`tr[data-job="${id}"]`)).toBeVisible();
      // Nothing wider than the screen: tables scroll in their own box.
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      await page.screenshot({ path: `test-results/stuck-${name}.png`, fullPage: true });
      expect(await axeViolations(page)).toEqual([]);
    }

    // Mark handled: the stuck import leaves the group (and the gauge); nothing is run.
    const awaiting = page.getByTestId("group-awaiting_operator");
    const waitingCount = Number((await page.getByTestId("count-awaiting_operator").innerText()).replace(/[(),]/g, ""));
    const all = `${waitingCount.toLocaleString("en-US")} job${waitingCount === 1 ? "" : "s"}`;
    await awaiting.getByRole("button", { name: `Mark ${all} handled…` }).click();
    await expect(
      awaiting.getByText(
        `Mark ${all} handled? They stop counting as waiting on an operator (and stop the alert) until they end again; nothing is run.`,
      ),
    ).toBeVisible();
    await awaiting.getByRole("button", { name: `Confirm: mark ${all} handled` }).click();
    await expect(awaiting.getByRole("status")).toHaveText(/^Marked handled \d+ of /);
    for (const id of waiting) await expect(awaiting.locator(`tr[data-job="${id}"]`)).toHaveCount(0);
    const [handled] = await sql<{ status: string; message: string }>(
      `SELECT j.status, e.message FROM "Job" j JOIN "JobEvent" e ON e."jobId" = j.id AND e.type = 'handled' WHERE j.id = $1`,
      [waiting[1]],
    );
    expect(handled).toMatchObject({
      status: "failed",
      message: "Marked handled by admin (its worker died too often). It no longer counts as waiting on an operator.",
    });

    const group = page.getByTestId("group-heartbeat_lost");
    const count = Number((await page.getByTestId("count-heartbeat_lost").innerText()).replace(/[(),]/g, ""));
    const jobs = `${count.toLocaleString("en-US")} job${count === 1 ? "" : "s"}`;
    await group.getByRole("button", { name: `Mark failed ${jobs}…` }).click();
    await expect(
      group.getByText(`Mark ${jobs} failed? Each gets a message naming you; they can be retried later.`),
    ).toBeVisible();
    await group.getByRole("button", { name: `Confirm: mark failed ${jobs}` }).click();
    await expect(group.getByRole("status")).toHaveText(/^Marked failed \d+ of /);
    await expect(group.locator(`tr[data-job="${silent}"]`)).toHaveCount(0);
    const [row] = await sql<{ status: string; message: string }>(`SELECT status, message FROM "Job" WHERE id = $1`, [
      silent,
    ]);
    expect(row!.status).toBe("failed");
    expect(row!.message).toMatch(
      /^Marked failed by admin from the stuck page after 42 of 120 rows \(heartbeat lost: three heartbeats missed\)\. Retry/,
    );
    // The late one is another group's: untouched.
    expect((await sql<{ status: string }>(`SELECT status FROM "Job" WHERE id = $1`, [late]))[0]?.status).toBe("queued");
  } finally {
    // Only this test's queue jobs: the late row left without one is the reaper's to end.
    for (const id of ids) await queue.remove(id).catch(() => undefined);
    await queue.close();
  }
});
