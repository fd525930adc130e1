import { readFileSync } from "node:fs";
import type { APIRequestContext } from "@playwright/test";
import { Redis } from "ioredis";
import { sql } from "./db";
import { BASE_URL, E2E_ENV } from "./env";
import { MALFORMED_URLS, NUL_JSON_BODIES } from "./bad-input-corpus";
import { transactionsCsv } from "./csv";
import { expect, test, users } from "./fixtures";

/** Server action ids by `file#export`, from the build the system under test serves. */
function actionId(action: string): string {
  const manifest = JSON.parse(readFileSync(".next/server/server-reference-manifest.json", "utf8")) as {
    node: Record<string, { filename: string; exportedName: string }>;
  };
  const id = Object.entries(manifest.node).find(([, a]) => `${a.filename}#${a.exportedName}` === action)?.[0];
  expect(id, `${action} is built`).toBeTruthy();
  return id!;
}

/**
 * Posts a server action the way a form with `useActionState` does (previous state, then the form
 * data), without the page: what anyone can send.
 */
function postAction(
  request: APIRequestContext,
  page: string,
  action: string,
  fields: Record<string, string>,
  headers: Record<string, string> = {},
) {
  // React's reply encoding: "$K1" refers to the form entries named "_1_<field>", sent before the
  // arguments ("0") that refer to them, as the browser sends them.
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(`_1_${k}`, v);
  form.append("0", '[{},"$K1"]');
  return request.post(page, {
    headers: { "next-action": actionId(action), origin: BASE_URL, ...headers },
    multipart: form,
    maxRedirects: 0,
  });
}

/**
 * The sign-in action as any client can post it, with the headers a proxy adds: these tests are of
 * the action's own answer (its cookie, its throttling), so they do not go through the login page.
 */
const postSignIn = (
  request: APIRequestContext,
  username: string,
  password: string,
  headers: Record<string, string> = {},
) => postAction(request, "/login", "app/login/actions.ts#signIn", { username, password, next: "/" }, headers);

const sessionCookie = (setCookie: string | undefined) =>
  setCookie?.split("\n").find((c) => c.startsWith("bounded_session="));

test("the session cookie is HttpOnly, SameSite=Lax, Path=/, and Secure when the request came over HTTPS", async ({
  playwright,
}) => {
  const plain = await playwright.request.newContext({ baseURL: BASE_URL });
  const signedIn = await postSignIn(plain, "admin", E2E_ENV.BOUNDED_ADMIN_PASSWORD, {
    "x-forwarded-for": "198.51.100.1",
  });
  const cookie = sessionCookie(signedIn.headers()["set-cookie"]);
  expect(cookie, `a session cookie is set (status ${signedIn.status()})`).toBeTruthy();
  const attributes = cookie!.split(";").map((a) => a.trim().toLowerCase());
  expect(attributes).toContain("httponly");
  expect(attributes).toContain("samesite=lax");
  expect(attributes).toContain("path=/");
  // Plain HTTP (this test server): a Secure cookie would never be sent back.
  expect(attributes).not.toContain("secure");
  await plain.dispose();

  const behindTls = await playwright.request.newContext({ baseURL: BASE_URL });
  const secure = await postSignIn(behindTls, "admin", E2E_ENV.BOUNDED_ADMIN_PASSWORD, {
    "x-forwarded-for": "198.51.100.1",
    "x-forwarded-proto": "https",
  });
  const secureCookie = sessionCookie(secure.headers()["set-cookie"]);
  expect(secureCookie).toBeTruthy();
  expect(secureCookie!.split(";").map((a) => a.trim().toLowerCase())).toEqual(
    expect.arrayContaining(["secure", "httponly", "samesite=lax", "path=/"]),
  );
  await behindTls.dispose();
});

test("server actions refuse a foreign Origin, even with an operator's session, and change nothing", async ({
  playwright,
  request,
}) => {
  // A job an operator may retry: an import, then marked failed.
  const created = await request.post("/api/imports?tenant=e2e-sec-origin", {
    data: Buffer.from(transactionsCsv(1).csv),
    headers: { "content-type": "text/csv" },
  });
  expect(created.status()).toBe(201);
  const { jobId } = await created.json();
  await expect
    .poll(async () => (await sql<{ status: string }>(`select status from "Job" where id = $1`, [jobId]))[0]!.status, {
      timeout: 30_000,
    })
    .toBe("completed");
  await sql(`update "Job" set status = 'failed', message = 'failed on purpose' where id = $1`, [jobId]);

  const operator = await playwright.request.newContext({ baseURL: BASE_URL });
  const signedIn = await postSignIn(operator, "admin", E2E_ENV.BOUNDED_ADMIN_PASSWORD, {
    "x-forwarded-for": "198.51.100.2",
  });
  const cookie = sessionCookie(signedIn.headers()["set-cookie"])!.split(";")[0]!;
  const state = async () => {
    const [row] = await sql<{ status: string; attempt: number; audited: string }>(
      `select status, attempt, (select count(*) from "AuditEntry" where target = $1) audited from "Job" where id = $1::uuid`,
      [jobId],
    );
    return { status: row!.status, attempt: row!.attempt, audited: Number(row!.audited) };
  };
  const before = await state();
  expect(before).toMatchObject({ status: "failed", audited: 0 });

  const retry = (origin: string) =>
    postAction(
      operator,
      `/jobs/${jobId}`,
      "app/(ops)/jobs/[id]/actions.ts#retryJobAction",
      { jobId, budgetSoftS: "" },
      { origin, cookie },
    );

  // The call a page on another site would make with the operator's cookie (were it sent). Next.js
  // compares Origin with Host before decoding the action and aborts it (it answers 500).
  const foreign = await retry("https://evil.example");
  expect(foreign.ok(), `refused (status ${foreign.status()})`).toBe(false);
  expect(await foreign.text()).not.toContain("Queued again");
  // The same as a plain HTML form post (no Next-Action header, the action id in the form).
  const formPost = await operator.post(`/jobs/${jobId}`, {
    headers: { origin: "https://evil.example", cookie },
    multipart: {
      [`$ACTION_ID_${actionId("app/(ops)/jobs/[id]/actions.ts#retryJobAction")}`]: "",
      jobId,
      budgetSoftS: "",
    },
    maxRedirects: 0,
  });
  expect(formPost.status()).not.toBe(303);
  expect(await state(), "nothing changed, not even an audit entry").toEqual(before);

  // The same call from the app's own origin does retry: the refusal above was the Origin's.
  const own = await retry(BASE_URL);
  expect(own.status()).toBe(200);
  await expect.poll(state).toMatchObject({ attempt: before.attempt + 1, audited: 1 });
  await operator.dispose();
});

test("progress tokens are 128-bit random hex and public progress URLs and answers carry no job id", async ({
  request,
}) => {
  const upload = () =>
    request.post("/api/imports?tenant=e2e-sec-tokens", {
      data: Buffer.from(transactionsCsv(2).csv),
      headers: { "content-type": "text/csv" },
    });
  const first = await upload();
  const second = await upload();
  const a = await first.json();
  const b = await second.json();
  for (const [response, created] of [
    [first, a],
    [second, b],
  ] as const) {
    expect(created.progressToken).toMatch(/^[0-9a-f]{32}$/);
    expect(created.progressUrl).toBe(`/progress/${created.progressToken}`);
    expect(response.headers().location).toBe(created.progressUrl);
    // Job ids are random UUIDs too (v4), never a counter.
    expect(created.jobId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  }
  expect(a.progressToken).not.toBe(b.progressToken);
  expect(a.jobId).not.toBe(b.jobId);

  for (const created of [a, b]) {
    const api = await request.get(`/api/progress/${created.progressToken}`);
    expect(api.status()).toBe(200);
    const text = await api.text();
    expect(text).not.toContain(created.jobId);
    expect(text).not.toContain(created.jobId.replaceAll("-", ""));
    const page = await request.get(created.progressUrl);
    expect(page.status()).toBe(200);
    const html = await page.text();
    expect(html).toContain(created.progressToken);
    expect(html, "the progress page does not reveal the job id").not.toContain(created.jobId);
  }
});

test("sign-in is rate-limited per user whatever the address, and per address whatever the user", async ({
  request,
}) => {
  users("add", "sec-throttle", "--role", "viewer", "--password", "sec-throttle-password");
  const refusal = async (r: Awaited<ReturnType<typeof postSignIn>>) => {
    expect(r.status()).toBeLessThan(500);
    return r.text();
  };
  // Ten wrong passwords, each from another address: the per-user limit does not care.
  for (let i = 0; i < 10; i++) {
    expect(
      await refusal(
        await postSignIn(request, "sec-throttle", `wrong-${i}`, { "x-forwarded-for": `203.0.113.${i + 1}` }),
      ),
    ).toContain("Wrong username or password.");
  }
  const blocked = await postSignIn(request, "sec-throttle", "sec-throttle-password", {
    "x-forwarded-for": "203.0.113.99",
  });
  expect(await refusal(blocked)).toContain("Too many failed sign-ins. Try again in 15 min.");
  expect(
    sessionCookie(blocked.headers()["set-cookie"]),
    "no session for the right password while throttled",
  ).toBeUndefined();

  // The window is 15 minutes (not scaled); when it has passed, the right password works again.
  const redis = new Redis(E2E_ENV.REDIS_URL);
  try {
    const key = `${E2E_ENV.BOUNDED_REDIS_PREFIX}:login-failures:user:sec-throttle`;
    const ttl = await redis.ttl(key);
    expect(ttl).toBeGreaterThan(800);
    expect(ttl).toBeLessThanOrEqual(900);
    await redis.del(key);
  } finally {
    redis.disconnect();
  }
  const after = await postSignIn(request, "sec-throttle", "sec-throttle-password", {
    "x-forwarded-for": "203.0.113.100",
  });
  expect(sessionCookie(after.headers()["set-cookie"]), "signed in once the window has passed").toBeTruthy();

  // Thirty failures from one address, over many user names: that address is refused, even the
  // right password of another user; another address is not.
  for (let i = 0; i < 30; i++)
    await refusal(await postSignIn(request, `sec-guess-${i}`, "guess", { "x-forwarded-for": "198.51.100.77" }));
  const fromGuesser = await postSignIn(request, "sec-throttle", "sec-throttle-password", {
    "x-forwarded-for": "198.51.100.77",
  });
  expect(await refusal(fromGuesser)).toContain("Too many failed sign-ins");
  expect(sessionCookie(fromGuesser.headers()["set-cookie"])).toBeUndefined();
  const elsewhere = await postSignIn(request, "sec-throttle", "sec-throttle-password", {
    "x-forwarded-for": "198.51.100.78",
  });
  expect(sessionCookie(elsewhere.headers()["set-cookie"])).toBeTruthy();
});

const bearer = { authorization: `Bearer ${E2E_ENV.BOUNDED_BOOTSTRAP_TOKEN}` };

test("a cookie-signed call from another origin of the same site is refused with 403; from the app's origin, or with a token, it is not", async ({
  playwright,
  request,
}) => {
  const browser = await playwright.request.newContext({ baseURL: BASE_URL });
  const signedIn = await postSignIn(browser, "admin", E2E_ENV.BOUNDED_ADMIN_PASSWORD, {
    "x-forwarded-for": "198.51.100.3",
  });
  const cookie = sessionCookie(signedIn.headers()["set-cookie"])!.split(";")[0]!;
  const evil = `http://evil.localhost:${new URL(BASE_URL).port}`;
  // An empty filter is refused by the route itself (bulk retry needs a filter): nothing changes either way.
  const bulkRetry = (headers: Record<string, string>) => browser.post("/api/jobs/retry", { data: {}, headers });

  const refused = await bulkRetry({ cookie, origin: evil, "sec-fetch-site": "same-site" });
  expect(refused.status()).toBe(403);
  expect((await refused.json()).error.message).toContain(`this request came from ${evil}, not from this site`);
  // A plain form post under Referrer-Policy: no-referrer says Origin: null; the browser's Sec-Fetch-Site decides.
  expect((await bulkRetry({ cookie, origin: "null", "sec-fetch-site": "cross-site" })).status()).toBe(403);

  const own = await bulkRetry({ cookie, origin: BASE_URL, "sec-fetch-site": "same-origin" });
  expect(own.status(), await own.text()).toBe(422);
  const token = await request.post("/api/jobs/retry", { data: {}, headers: { ...bearer, origin: evil } });
  expect(token.status()).toBe(422);

  // The refusal is in the audit log, under the operator's name.
  const refusals = await sql<{ actor: string; result: string }>(
    `select actor, result from "AuditEntry" where message like $1`,
    [`%came from ${evil},%`],
  );
  expect(refusals).toEqual([{ actor: "admin", result: "refused" }]);
  await browser.dispose();
});

test("a session cookie captured before sign-out is refused after it", async ({ playwright, request }) => {
  const browser = await playwright.request.newContext({ baseURL: BASE_URL });
  const signedIn = await postSignIn(browser, "admin", E2E_ENV.BOUNDED_ADMIN_PASSWORD, {
    "x-forwarded-for": "198.51.100.4",
  });
  const captured = sessionCookie(signedIn.headers()["set-cookie"])!.split(";")[0]!;
  expect((await request.get("/api/jobs", { headers: { cookie: captured } })).status()).toBe(200);
  const signedOut = await postAction(browser, "/login", "app/login/actions.ts#signOut", {}, { cookie: captured });
  expect(signedOut.status()).toBeLessThan(400);
  const after = await request.get("/api/jobs", { headers: { cookie: captured } });
  expect(after.status()).toBe(401);
  await browser.dispose();
});

test("a changed password ends the user's sessions", async ({ playwright, request }) => {
  users("add", "sec-passwd", "--role", "viewer", "--password", "sec-passwd-password-1");
  const browser = await playwright.request.newContext({ baseURL: BASE_URL });
  const signedIn = await postSignIn(browser, "sec-passwd", "sec-passwd-password-1", {
    "x-forwarded-for": "198.51.100.5",
  });
  const captured = sessionCookie(signedIn.headers()["set-cookie"])!.split(";")[0]!;
  expect((await request.get("/api/jobs", { headers: { cookie: captured } })).status()).toBe(200);
  users("passwd", "sec-passwd", "--password", "sec-passwd-password-2");
  expect((await request.get("/api/jobs", { headers: { cookie: captured } })).status()).toBe(401);
  await browser.dispose();
});

test("X-Forwarded-For from a peer that is not a trusted proxy changes nothing: its sign-in failures count against its own address", async ({
  playwright,
}) => {
  // The test runner is the trusted proxy over 127.0.0.1; over ::1 it is just a client.
  const v6 = BASE_URL.replace("localhost", "[::1]");
  const direct = await playwright.request.newContext({ baseURL: v6 });
  const reachable = await direct.get("/api/livez").then(
    (r) => r.ok(),
    () => false,
  );
  // The suite's server listens on every address (next start); without ::1 this door would go untested.
  expect(reachable, "the web server answers on [::1], the address that is not a trusted proxy").toBe(true);
  const redis = new Redis(E2E_ENV.REDIS_URL);
  try {
    await redis.del(`${E2E_ENV.BOUNDED_REDIS_PREFIX}:login-failures:address:::1`);
    for (let i = 0; i < 30; i++) {
      const r = await postSignIn(direct, `sec-v6-${i}`, "guess", { "x-forwarded-for": `192.0.2.${i + 1}`, origin: v6 });
      expect(await r.text()).toContain("Wrong username or password.");
    }
    const forged = await postSignIn(direct, "admin", E2E_ENV.BOUNDED_ADMIN_PASSWORD, {
      "x-forwarded-for": "192.0.2.200",
      origin: v6,
    });
    expect(await forged.text()).toContain("Too many failed sign-ins");
    expect(sessionCookie(forged.headers()["set-cookie"])).toBeUndefined();
  } finally {
    await redis.del(`${E2E_ENV.BOUNDED_REDIS_PREFIX}:login-failures:address:::1`);
    redis.disconnect();
    await direct.dispose();
  }
});

test("anonymous refusals are counted per address and minute, not written one by one (200 refusals: one count, at most two entries)", async ({
  request,
}) => {
  const address = "198.51.100.201";
  const statuses = await Promise.all(
    Array.from({ length: 200 }, () =>
      request.get("/api/budgets", { headers: { "x-forwarded-for": address } }).then((r) => r.status()),
    ),
  );
  expect(new Set(statuses)).toEqual(new Set([401]));
  const rows = await sql<{ count: number }>(
    `select count from "AuditRefusalTally" where address = $1 and route = 'GET /api/budgets'`,
    [address],
  );
  expect(rows.length).toBeLessThanOrEqual(2);
  expect(rows.reduce((n, r) => n + Number(r.count), 0)).toBe(200);
  // Only the first refusal of the minute is also an entry.
  expect((await sql(`select 1 from "AuditEntry" where "clientAddress" = $1`, [address])).length).toBeLessThanOrEqual(2);
});

test.describe("malformed addresses and fields", () => {
  for (const path of MALFORMED_URLS) {
    test(`${path} is a 400`, async ({ request }) => {
      const answer = await request.get(path, { maxRedirects: 0 });
      expect(answer.status()).toBe(400);
    });
  }
  test("a NUL byte in a JSON field is a 400", async ({ request }) => {
    for (const { path, body } of NUL_JSON_BODIES) {
      const answer = await request.post(path, {
        data: body,
        headers: { ...bearer, "content-type": "application/json" },
      });
      expect(answer.status(), path).toBe(400);
      expect((await answer.json()).error.code).toBe("nul_byte");
    }
  });
});

test("every page has a nonce-based Content-Security-Policy, a fresh nonce each time, on the framework's scripts", async ({
  request,
}) => {
  const nonces = new Set<string>();
  for (const path of ["/login", "/upload", "/login"]) {
    const answer = await request.get(path);
    const csp = answer.headers()["content-security-policy"] ?? "";
    for (const directive of [
      "default-src 'self'",
      "object-src 'none'",
      "base-uri 'self'",
      "form-action 'self'",
      "frame-ancestors 'none'",
    ])
      expect(csp).toContain(directive);
    const nonce = /script-src 'self' 'nonce-([A-Za-z0-9+/=]+)' 'strict-dynamic'/.exec(csp)?.[1];
    expect(nonce, csp).toBeTruthy();
    expect(csp).not.toMatch(/script-src[^;]*'unsafe-inline'/);
    const html = await answer.text();
    expect(html).toContain(`nonce="${nonce}"`);
    // No script element without the nonce.
    for (const tag of html.match(/<script\b[^>]*>/g) ?? []) expect(tag).toContain(`nonce="${nonce}"`);
    nonces.add(nonce!);
  }
  expect(nonces.size).toBe(3);
});

test.describe("without JavaScript", () => {
  test.use({ javaScriptEnabled: false });

  test("the sign-in form works as a plain HTML form post", async ({ page }) => {
    users("add", "sec-nojs", "--role", "viewer", "--password", "sec-nojs-password");
    await page.goto("/login?next=%2Fjobs");
    await page.getByLabel("Username").fill("sec-nojs");
    await page.getByLabel("Password").fill("wrong-password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page).toHaveURL(/\/login\?error=invalid/);
    await expect(page.getByRole("alert")).toHaveText("Wrong username or password.");
    await expect(page.getByLabel("Username")).toHaveValue("sec-nojs");
    for (const width of [1440, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.screenshot({ path: `test-results/login-nojs-error-${width}.png`, fullPage: true });
    }
    await page.getByLabel("Password").fill("sec-nojs-password");
    await page.getByRole("button", { name: "Sign in" }).click();
    // Signed in: back where the visitor was going, with a session the API accepts. (The page itself
    // streams its list behind a loading state, which only JavaScript reveals.)
    await expect(page).toHaveURL(/\/jobs$/);
    expect((await page.context().cookies()).map((c) => c.name)).toContain("bounded_session");
    expect((await page.request.get("/api/jobs")).status()).toBe(200);
  });
});
