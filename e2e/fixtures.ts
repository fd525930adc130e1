import { execFileSync } from "node:child_process";
import { test as base, expect, type Page } from "@playwright/test";
import { E2E_ENV, TIGHT_ENV, TIGHT_URL } from "./env";

export { expect };

/** Who signs in: the bootstrap operator (`admin`), or a viewer made for the browser tests. */
export type Role = "operator" | "viewer";
export type Credentials = { username: string; password: string };

/**
 * The viewer the role fixtures sign in as, on either system. Tests that change a user's state
 * (revoke its tokens, throttle its sign-ins) make a user of their own instead, so this one stays
 * usable for every other test.
 */
export const VIEWER: Credentials = { username: "e2e-viewer", password: "e2e-viewer-password" };

/** The environment of the system at `baseURL`: the main one, or the tight one a spec selects with `test.use({ baseURL: TIGHT_URL })`. */
export function systemEnv(baseURL: string | undefined): typeof E2E_ENV | typeof TIGHT_ENV {
  return baseURL === TIGHT_URL ? TIGHT_ENV : E2E_ENV;
}

/** `scripts/users.ts` against the system with environment `env`; returns what it printed. */
function usersOn(env: typeof E2E_ENV | typeof TIGHT_ENV, args: string[]): string {
  return execFileSync(process.execPath, ["--import", "tsx", "scripts/users.ts", ...args], {
    env: { ...process.env, ...env },
    stdio: "pipe",
  }).toString();
}

/** `scripts/users.ts` against the main system: `users("add", name, "--role", role, "--password", pw)`, `users("token", name)`, … */
export const users = (...args: string[]): string => usersOn(E2E_ENV, args);

/**
 * Fills in and submits the sign-in form the page shows now (the login page, or where a redirect
 * to it left the page). Waits for nothing: what the answer is, is the caller's to check.
 */
export async function submitSignIn(page: Page, who: Credentials): Promise<void> {
  await page.getByLabel("Username").fill(who.username);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/** Systems (by database) where the viewer exists already, in this worker process. */
const viewerMadeOn = new Set<string>();

export type SignInOptions = {
  /** Sign in through `/login?next=…` and wait to land there; without it, wait for the Overview. */
  next?: string;
};

type Fixtures = {
  /** The credentials of a role on this test's system; the viewer is created the first time. */
  credentialsFor: (role: Role) => Promise<Credentials>;
  /**
   * Signs the test's `page` in through the login form — as a role, or as a user the test made —
   * and waits until the signed-in page is shown. Resolves with that page.
   */
  signIn: (who: Role | Credentials, options?: SignInOptions) => Promise<Page>;
  /** The test's `page`, signed in as the operator before the test starts; it has opened no page yet. */
  operatorPage: Page;
  /** The test's `page`, signed in as the viewer before the test starts; it has opened no page yet. */
  viewerPage: Page;
};

/**
 * Signs `page`'s browser context in through the sign-in API's JSON form (the same sign-in as the
 * form's; the form itself is tested in auth.spec.ts and security.spec.ts): the session cookie lands
 * in the context, and no page is drawn for it.
 */
async function signedInThroughApi(page: Page, who: Credentials): Promise<Page> {
  const res = await page.request.post("/api/auth/login", { data: { username: who.username, password: who.password } });
  expect(res.status(), `sign-in of ${who.username}: ${await res.text()}`).toBe(200);
  return page;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

export const test = base.extend<Fixtures>({
  // Every page of every test runs under the Content-Security-Policy: a violation (a script, style,
  // frame or connection the policy blocks) fails the test that met it.
  page: async ({ page }, use) => {
    const violations: string[] = [];
    await page.addInitScript(() => {
      document.addEventListener("securitypolicyviolation", (e) =>
        console.error(
          `CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "an inline resource"} on ${location.pathname}`,
        ),
      );
    });
    page.on("console", (message) => {
      if (message.type() === "error" && /Content Security Policy|CSP violation/i.test(message.text()))
        violations.push(message.text());
    });
    await use(page);
    expect(violations, "no Content-Security-Policy violation on any page").toEqual([]);
  },
  credentialsFor: async ({ baseURL }, use) => {
    await use(async (role) => {
      const env = systemEnv(baseURL);
      if (role === "operator") return { username: "admin", password: env.BOUNDED_ADMIN_PASSWORD };
      if (!viewerMadeOn.has(env.DATABASE_URL)) {
        // Idempotent: a user that exists keeps its name and role and gets this password again.
        usersOn(env, ["add", VIEWER.username, "--role", "viewer", "--password", VIEWER.password]);
        viewerMadeOn.add(env.DATABASE_URL);
      }
      return VIEWER;
    });
  },
  signIn: async ({ page, credentialsFor }, use) => {
    await use(async (who, options = {}) => {
      const credentials = typeof who === "string" ? await credentialsFor(who) : who;
      await page.goto(options.next === undefined ? "/login" : `/login?next=${encodeURIComponent(options.next)}`);
      await submitSignIn(page, credentials);
      if (options.next === undefined) await expect(page.getByRole("heading", { name: "Overview" })).toBeVisible();
      else await expect(page).toHaveURL(new RegExp(`${escapeRegExp(options.next)}$`));
      return page;
    });
  },
  operatorPage: async ({ page, credentialsFor }, use) => {
    await use(await signedInThroughApi(page, await credentialsFor("operator")));
  },
  viewerPage: async ({ page, credentialsFor }, use) => {
    await use(await signedInThroughApi(page, await credentialsFor("viewer")));
  },
});
