import { randomUUID } from "node:crypto";
import { transactionsCsv } from "./csv";
import { sql } from "./db";
import { E2E_ENV } from "./env";
import { expect, test } from "./fixtures";

// The simulators' webhook receiver stands in for the tenant's endpoint: it verifies each signature
// with the secret the operator copies from the page.
const receiver = `http://127.0.0.1:${E2E_ENV.BOUNDED_SIM_PORT}/webhooks/receiver`;

test("an operator registers a tenant's webhook; a finished import is delivered, signed, and the job page shows it", async ({
  page,
  request,
  signIn,
}) => {
  const tenant = `e2e-hook-${randomUUID().slice(0, 8)}`;
  await signIn("operator");
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto("/webhooks");
  const form = page.getByRole("region", { name: "Register or change" });
  await form.getByLabel("Tenant").fill(tenant);
  await form.getByLabel("URL (http or https)").fill(receiver);
  await form.getByRole("button", { name: "Save webhook" }).click();
  await expect(form.getByRole("status").first()).toContainText(`Webhook for ${tenant} registered`);
  const secret = (await form.getByTestId("webhook-secret").textContent())!.trim();
  expect(secret).toMatch(/^whsec_/);
  await page.screenshot({ path: "test-results/webhooks-1440.png", fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: "test-results/webhooks-390.png", fullPage: true });
  await expect(
    page.getByRole("table", { name: "Webhook endpoints" }).locator(`tr[data-tenant="${tenant}"]`),
  ).toContainText(receiver);
  // The secret is shown once: never stored in the audit log.
  const audit = await sql<{ message: string; params: string }>(
    `select message, params::text from "AuditEntry" where action = 'webhook.set' and target = $1`,
    [tenant],
  );
  expect(audit).toHaveLength(1);
  expect(JSON.stringify(audit)).not.toContain(secret);

  const configured = await request.put(`${receiver}/_config`, { data: { secret, failFirst: 1 } });
  expect(configured.status()).toBe(200);
  const created = await request.post(`/api/imports?tenant=${tenant}`, {
    data: transactionsCsv(5).csv,
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  const { jobId } = (await created.json()) as { jobId: string };

  // The first try is refused by the receiver (on purpose), the second one is delivered.
  await expect
    .poll(
      async () =>
        (await sql<{ status: string }>(`select status::text from "WebhookDelivery" where "jobId" = $1`, [jobId]))[0]
          ?.status,
      { timeout: 30_000 },
    )
    .toBe("delivered");
  const got = (
    (await (await request.get(`${receiver}/_received`)).json()) as {
      received: { body: string; verified: boolean; answered: number }[];
    }
  ).received.filter((r) => (JSON.parse(r.body) as { id: string }).id === jobId);
  expect(got.map((r) => [r.verified, r.answered])).toEqual([
    [true, 500],
    [true, 200],
  ]);

  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`/jobs/${jobId}`);
  const section = page.getByRole("region", { name: /Webhook deliveries/ });
  await expect(section).toContainText("1 of 1 delivered");
  const row = section.getByTestId("webhook-deliveries").locator("tbody tr");
  await expect(row).toHaveAttribute("data-delivery", "delivered");
  await expect(row).toContainText("2 of 5");
  await expect(row).toContainText("HTTP 200");
  await section.scrollIntoViewIfNeeded();
  await page.screenshot({ path: "test-results/webhook-deliveries-1440.png" });
  await page.setViewportSize({ width: 390, height: 844 });
  await section.scrollIntoViewIfNeeded();
  await page.screenshot({ path: "test-results/webhook-deliveries-390.png" });

  const removed = await request.delete(`/api/tenants/${tenant}/webhook`, {
    headers: { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` },
  });
  expect(removed.status()).toBe(200);
});
