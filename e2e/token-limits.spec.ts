import { expect, test } from "./fixtures";
import { transactionsCsv } from "./csv";

/**
 * /limiter shows the model's tokens per minute as Bounded learnt them: nothing is configured in the
 * system under test (BOUNDED_MODEL_TPM unset), so once an import's calls have answered, the limit
 * the simulator announces in its x-ratelimit-* headers (BOUNDED_SIM_MODEL_TPM, 10,000,000 by
 * default) is on the page, with where it came from, what the shared bucket holds and the
 * provider's last word.
 */
test("the limiter page shows the model's token limit learnt from the provider's headers, what is left of it and when it is whole again", async ({
  page,
  request,
  signIn,
}) => {
  const { csv } = transactionsCsv(40);
  const created = await request.post("/api/imports?tenant=e2e-token-limits", {
    data: csv,
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  const { progressToken } = await created.json();
  await expect(async () =>
    expect((await (await request.get(`/api/progress/${progressToken}`)).json()).status).toBe("completed"),
  ).toPass({ timeout: 60_000 });

  await signIn("operator", { next: "/limiter" });
  await page.goto("/limiter");
  await expect(page.getByRole("heading", { name: "Model tokens per minute (all workers)" })).toBeVisible();
  const row = page.getByTestId("token-limits").locator('tr[data-budget="tokens"]');
  await expect(row).toContainText("10,000,000 tokens/min");
  await expect(row).toContainText("learnt from the provider’s headers");
  await expect(row).toContainText(/last announced/);
  await expect(row).toContainText(/of 10,000,000 remaining/);
  await expect(row).toContainText(/of 10,000,000 tokens/);
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.getByRole("heading", { name: "Model tokens per minute (all workers)" }).scrollIntoViewIfNeeded();
  await page.screenshot({ path: "test-results/limiter-tokens-1440.png", fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.getByRole("heading", { name: "Model tokens per minute (all workers)" }).scrollIntoViewIfNeeded();
  await page.screenshot({ path: "test-results/limiter-tokens-390.png", fullPage: true });
  // The page and its API twin say the same.
  const report = await (await page.request.get("/api/limiter")).json();
  const model = report.providers.find((p: { provider: string }) => p.provider === "model");
  expect(model.tokenLimits.budgets[0]).toMatchObject({ budget: "tokens", limit: 10_000_000, source: "headers" });
});
