import { E2E_ENV } from "./env";
import { expect, submitSignIn, test, users, VIEWER } from "./fixtures";

const addUser = (name: string, role: "viewer" | "operator", password: string) =>
  users("add", name, "--role", role, "--password", password);

test("an anonymous visitor of /jobs is sent to /login and comes back after signing in", async ({
  page,
  credentialsFor,
}) => {
  await page.goto("/jobs?status=completed");
  await expect(page).toHaveURL(/\/login\?next=%2Fjobs%3Fstatus%3Dcompleted$/);
  await submitSignIn(page, await credentialsFor("operator"));
  await expect(page).toHaveURL(/\/jobs\?status=completed$/);
  await expect(page.getByRole("heading", { name: "Jobs", exact: true })).toBeVisible();
  await expect(page.getByText("admin · operator")).toBeVisible();
});

test("a viewer signs in and sees the jobs list and a job's page", async ({ page, request, signIn }) => {
  const created = await request.post("/api/imports?tenant=e2e-viewer-sees", {
    data: "date,amount,currency,counterparty,description\n2026-01-02,-3.50,EUR,Pizzeria Roma,Lunch\n",
    headers: { "content-type": "text/csv" },
  });
  const { jobId } = await created.json();

  await signIn("viewer");
  await expect(page.getByText(`${VIEWER.username} · viewer`)).toBeVisible();

  await page.goto("/jobs?tenant=e2e-viewer-sees");
  await expect(page.getByRole("link", { name: jobId.slice(0, 8) })).toBeVisible();
  await page.getByRole("link", { name: jobId.slice(0, 8) }).click();
  await expect(page.getByText(jobId)).toBeVisible();
  await expect(page.getByRole("heading", { name: "Attempts and events" })).toBeVisible();
  await page.screenshot({ path: "test-results/job-detail.png", fullPage: true });
  await page.goto("/jobs");
  await page.screenshot({ path: "test-results/jobs-list.png", fullPage: true });
});

test("the jobs API refuses anonymous and unknown-token calls with 401 and accepts a token", async ({ request }) => {
  const anonymous = await request.get("/api/jobs");
  expect(anonymous.status()).toBe(401);
  expect((await anonymous.json()).error.code).toBe("unauthenticated");
  expect((await request.get("/api/jobs/00000000-0000-0000-0000-000000000000")).status()).toBe(401);
  const wrong = await request.get("/api/jobs", { headers: { authorization: "Bearer bnd_not-a-real-token-at-all" } });
  expect(wrong.status()).toBe(401);

  const auth = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };
  const ok = await request.get("/api/jobs?limit=5", { headers: auth });
  expect(ok.status()).toBe(200);
  expect(Array.isArray((await ok.json()).jobs)).toBe(true);
  const badFilter = await request.get("/api/jobs?status=exploded", { headers: auth });
  expect(badFilter.status()).toBe(422);
  expect((await badFilter.json()).error.issues[0].path).toBe("status");
  expect((await request.get("/api/jobs/not-a-uuid", { headers: auth })).status()).toBe(404);
});

test("a revoked token is refused", async ({ request }) => {
  addUser("revoked-e2e", "viewer", "revoked-e2e-password");
  const token = users("token", "revoked-e2e").trim().split("\n").pop()!;
  expect((await request.get("/api/jobs", { headers: { authorization: `Bearer ${token}` } })).status()).toBe(200);
  users("revoke", "revoked-e2e");
  expect((await request.get("/api/jobs", { headers: { authorization: `Bearer ${token}` } })).status()).toBe(401);
});

test("wrong passwords are refused, then sign-in is rate-limited", async ({ page }) => {
  addUser("throttled-e2e", "viewer", "throttled-e2e-password");
  await page.goto("/login");
  for (let i = 0; i < 10; i++) {
    await submitSignIn(page, { username: "throttled-e2e", password: `wrong-${i}` });
    await expect(page.locator("p.form-error")).toHaveText("Wrong username or password.");
    await page.reload();
  }
  await submitSignIn(page, { username: "throttled-e2e", password: "throttled-e2e-password" });
  await expect(page.locator("p.form-error")).toContainText("Too many failed sign-ins");
  await expect(page).toHaveURL(/\/login/);
});

test("the session cookie is httpOnly and SameSite", async ({ operatorPage: page, context }) => {
  await page.goto("/");
  await page.screenshot({ path: "test-results/overview.png", fullPage: true });
  const cookie = (await context.cookies()).find((c) => c.name === "bounded_session");
  expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Lax" });
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/login$/);
  await page.goto("/jobs");
  await expect(page).toHaveURL(/\/login/);
});
