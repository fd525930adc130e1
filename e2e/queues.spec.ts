import { randomUUID } from "node:crypto";
import type { APIRequestContext, Page } from "@playwright/test";
import { sql } from "./db";
import { E2E_ENV } from "./env";
import { expect, test, users } from "./fixtures";

/**
 * The Queues page against the running system: counts that follow the queue without a reload (the
 * operator layout re-renders the page every few seconds), and pausing / resuming a queue from the
 * page and from its API twin. Small CSV imports are the work: the e2e system gives imports a
 * generous budget, so a loaded machine cannot time them out. No other spec runs while this one
 * does (one Playwright worker), and the queue is resumed whatever happens.
 */

const Q = "imports";
const operator = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };

async function resume(request: APIRequestContext) {
  const r = await request.post(`/api/queues/${Q}/resume`, { headers: operator, data: {} });
  expect(r.status()).toBe(200);
}

test.afterEach(async ({ request }) => {
  await resume(request);
});

async function startImports(request: APIRequestContext, n: number): Promise<string[]> {
  const tenant = `e2e-queues-${randomUUID().slice(0, 8)}`;
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await request.post(`/api/imports?tenant=${tenant}`, {
      data: "date,amount,currency,counterparty,description\n2026-01-02,-3.50,EUR,Pizzeria Roma,Lunch\n2026-01-03,-12.00,EUR,DB Bahn,Ticket\n",
      headers: { "content-type": "text/csv" },
    });
    expect(r.status()).toBe(201);
    ids.push(((await r.json()) as { jobId: string }).jobId);
  }
  return ids;
}

const statuses = async (ids: string[]) =>
  (await sql<{ status: string }>(`SELECT status FROM "Job" WHERE id = ANY($1::uuid[]) ORDER BY status`, [ids])).map(
    (r) => r.status,
  );

const waitingCell = (page: Page) => page.getByTestId(`queue-${Q}-waiting`);

test("waiting jobs rise while the queue is paused and fall when it is resumed, on the page without a reload", async ({
  operatorPage: page,
  request,
}) => {
  await page.setViewportSize({ width: 1440, height: 1000 });
  await page.goto("/queues");
  await expect(page.getByRole("heading", { name: "Queues", exact: true })).toBeVisible();
  const card = page.getByTestId(`queue-card-${Q}`);
  await expect(card.getByTestId(`queue-${Q}-state`)).toHaveText("Running.");
  const baseline = Number(await waitingCell(page).textContent());
  // Anything that reloads the document loses this mark; a live re-render keeps it.
  await page.evaluate(() => ((window as unknown as { __sameDocument: boolean }).__sameDocument = true));

  await card.getByRole("button", { name: `Pause ${Q}` }).click();
  await expect(card.getByTestId(`queue-${Q}-state`)).toContainText("Paused by admin since");
  await expect(page.getByRole("row").filter({ hasText: Q }).first()).toContainText("Paused by admin since");

  const ids = await startImports(request, 3);
  await expect(waitingCell(page)).toHaveText(String(baseline + 3));
  await expect(page.getByTestId(`queue-${Q}-drain`)).toHaveText("paused");
  // Held: all three counted as waiting on the page (a page render later than their creation),
  // and still queued, where free worker slots would have run them in milliseconds at this scale.
  expect(await statuses(ids)).toEqual(["queued", "queued", "queued"]);
  await page.screenshot({ path: test.info().outputPath("queues-desktop.png"), fullPage: true });
  await page.setViewportSize({ width: 390, height: 900 });
  await page.screenshot({ path: test.info().outputPath("queues-phone.png"), fullPage: true });
  await page.screenshot({ path: test.info().outputPath("queues-phone-top.png") });
  await card.screenshot({ path: test.info().outputPath("queues-phone-card.png") });
  await page.setViewportSize({ width: 1440, height: 1000 });

  await card.getByRole("button", { name: `Resume ${Q}` }).click();
  await expect(card.getByTestId(`queue-${Q}-state`)).toHaveText("Running.");
  await expect.poll(() => statuses(ids), { timeout: 30_000 }).toEqual(["completed", "completed", "completed"]);
  await expect(waitingCell(page)).toHaveText(String(baseline));
  // What completed shows in the throughput chart's text too.
  await expect(page.getByTestId(`queue-${Q}-chart`)).toHaveAttribute(
    "aria-label",
    /[1-9]\d* completed in the last hour/,
  );
  await page.screenshot({ path: test.info().outputPath("queues-desktop-resumed.png"), fullPage: true });
  expect(await page.evaluate(() => (window as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);
});

test("the API twins pause and resume idempotently, refuse an unknown queue with 404 and a viewer with 403, and are audited", async ({
  request,
}) => {
  const [{ last }] = (await sql<{ last: string }>(`SELECT coalesce(max(id), 0)::text AS last FROM "AuditEntry"`)) as [
    { last: string },
  ];
  const pause = async () => request.post(`/api/queues/${Q}/pause`, { headers: operator, data: {} });
  const first = await pause();
  expect(first.status()).toBe(200);
  expect(await first.json()).toMatchObject({ queue: Q, paused: true, by: "admin" });
  const again = await pause();
  expect(again.status()).toBe(200);
  expect(await again.json()).toMatchObject({ queue: Q, paused: true, by: "admin", since: (await first.json()).since });

  const overview = await request.get("/api/queues", { headers: operator });
  expect(overview.status()).toBe(200);
  const body = (await overview.json()) as {
    queues: { queue: string; paused: { by: string } | null; counts: Record<string, number> }[];
  };
  expect(body.queues.find((q) => q.queue === Q)?.paused?.by).toBe("admin");
  expect(Object.keys(body.queues[0]!.counts).sort()).toEqual(["active", "delayed", "failed", "waiting"]);

  const unknown = await request.post("/api/queues/no-such-queue/pause", { headers: operator, data: {} });
  expect(unknown.status()).toBe(404);
  expect((await unknown.json()).error).toMatchObject({
    code: "unknown_queue",
    message: expect.stringContaining('No queue is called "no-such-queue"'),
  });

  users("add", "queues-viewer", "--role", "viewer", "--password", "queues-viewer-password");
  const viewerToken = users("token", "queues-viewer").trim().split("\n").pop()!;
  const refused = await request.post(`/api/queues/${Q}/resume`, {
    headers: { authorization: `Bearer ${viewerToken}` },
    data: {},
  });
  expect(refused.status()).toBe(403);

  const resumed = await request.post(`/api/queues/${Q}/resume`, { headers: operator, data: {} });
  expect(await resumed.json()).toMatchObject({ queue: Q, paused: false });
  const idle = await request.post(`/api/queues/${Q}/resume`, { headers: operator, data: {} });
  expect(idle.status()).toBe(200);
  expect(await idle.json()).toMatchObject({ paused: false, message: `${Q} was not paused.` });

  const audit = await sql<{ action: string; result: string; actor: string }>(
    `SELECT action, result, actor FROM "AuditEntry" WHERE action IN ('queue.pause', 'queue.resume') AND id > $1::bigint ORDER BY id`,
    [last],
  );
  expect(audit).toEqual(
    expect.arrayContaining([
      { action: "queue.pause", result: "ok", actor: "admin" },
      { action: "queue.pause", result: "refused", actor: "admin" },
      { action: "queue.resume", result: "refused", actor: "queues-viewer" },
      { action: "queue.resume", result: "ok", actor: "admin" },
    ]),
  );
});

test("a viewer sees the queues but not the controls", async ({ viewerPage: page }) => {
  await page.goto("/queues");
  await expect(page.getByTestId(`queue-${Q}-waiting`)).toBeVisible();
  await expect(page.getByRole("button", { name: `Pause ${Q}` })).toBeDisabled();
  await expect(page.getByText("Pausing and resuming need the operator role.").first()).toBeVisible();
});

test("a job in a paused queue says why it waits: the API's blockedBy, one sentence on its page, the queue's cause on /queues, the customer's words", async ({
  operatorPage: page,
  request,
}) => {
  const paused = await request.post(`/api/queues/${Q}/pause`, { headers: operator, data: {} });
  expect(paused.status()).toBe(200);
  const [id] = await startImports(request, 1);
  const job = await request.get(`/api/jobs/${id}`, { headers: operator });
  expect(job.status()).toBe(200);
  const { blockedBy, progressToken } = (await job.json()) as {
    blockedBy: { type: string; message: string; since: string };
    progressToken: string;
  };
  expect(blockedBy.type).toBe("queue_paused");
  expect(blockedBy.message).toMatch(
    /^Queue imports is paused \(by .+ since \d\d:\d\d:\d\d UTC\): nothing on it starts until it is resumed on \/queues\.$/,
  );

  for (const width of [1440, 390]) {
    await page.setViewportSize({ width, height: 900 });
    await page.goto(`/jobs/${id}`);
    const sentence = page.getByTestId("blocked-by");
    await expect(sentence).toHaveText(`Why it is waiting: ${blockedBy.message}`);
    await expect(sentence).toHaveAttribute("data-type", "queue_paused");
    await sentence.scrollIntoViewIfNeeded();
    await page.screenshot({ path: test.info().outputPath(`job-blocked-by-${width}.png`) });
  }

  // The API twin of the page names the same cause for the queue.
  const overview = await request.get("/api/queues", { headers: operator });
  const queues = (
    (await overview.json()) as { queues: { queue: string; waitingFor: { type: string; count: number } | null }[] }
  ).queues;
  expect(queues.find((q) => q.queue === Q)?.waitingFor).toMatchObject({
    type: "queue_paused",
    count: expect.any(Number),
  });

  await page.setViewportSize({ width: 1440, height: 1000 });
  await page.goto("/queues");
  const cause = page.getByTestId(`queue-${Q}-cause`);
  await expect(cause).toHaveAttribute("data-type", "queue_paused");
  await expect(cause).toContainText("Jobs wait for: the queue is paused");
  await page.getByTestId(`queue-card-${Q}`).screenshot({ path: test.info().outputPath("queues-card-cause-1440.png") });
  await page.setViewportSize({ width: 390, height: 900 });
  await page.getByTestId(`queue-card-${Q}`).screenshot({ path: test.info().outputPath("queues-card-cause-390.png") });

  // The customer reads the same fact without the operators' words.
  await page.goto(`/progress/${progressToken}`);
  await expect(
    page.getByText(
      "Our team has paused this kind of work for the moment; yours starts as soon as they turn it back on.",
    ),
  ).toBeVisible();
  await page.screenshot({ path: test.info().outputPath("progress-paused-390.png") });

  await resume(request);
  await expect.poll(() => statuses([id!]), { timeout: 30_000 }).toEqual(["completed"]);
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`/jobs/${id}`);
  await expect(page.getByTestId("blocked-by")).toHaveCount(0);
});
