import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

/**
 * The secrets a process holds — a user's password (right or wrong), the session secret, an API
 * token (the bootstrap token) — never reach a log line, whatever is logged on the way: sign-in,
 * a request authenticated by token or cookie, an unexpected error that carries the request.
 * Everything the JSON logger writes is captured at the pino destination, at level trace.
 */
const SECRETS = vi.hoisted(() => {
  const s = {
    password: `pw-${Math.random().toString(36).slice(2)}-right`,
    wrongPassword: `pw-${Math.random().toString(36).slice(2)}-wrong`,
    sessionSecret: `session-secret-${Math.random().toString(36).slice(2)}-0123456789abcdef`,
    bootstrapToken: `bootstrap-${Math.random().toString(36).slice(2)}-0123456789abcdef`,
  };
  process.env.LOG_LEVEL = "trace";
  process.env.BOUNDED_SESSION_SECRET = s.sessionSecret;
  process.env.BOUNDED_BOOTSTRAP_TOKEN = s.bootstrapToken;
  return s;
});

const logged = vi.hoisted(() => [] as string[]);

vi.mock("pino", async (importOriginal) => {
  const real = (await importOriginal<typeof import("pino")>()).default;
  const { Writable } = await import("node:stream");
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logged.push(String(chunk));
      done();
    },
  });
  // The project's own options (level, redaction), with the output captured here.
  const captured = Object.assign((options: import("pino").LoggerOptions) => real(options, sink), real);
  return { default: captured };
});

/** One request's cookies and headers, as `next/headers` gives them to the auth code. */
const jar = vi.hoisted(() => new Map<string, string>());
const requestHeaders = vi.hoisted(() => new Headers());
vi.mock("next/headers", () => ({
  cookies: async () => ({
    get: (name: string) => (jar.has(name) ? { name, value: jar.get(name)! } : undefined),
    getAll: () => [...jar].map(([name, value]) => ({ name, value })),
    has: (name: string) => jar.has(name),
    set: (name: string | { name: string; value: string }, value?: string) => {
      if (typeof name === "object") jar.set(name.name, name.value);
      else jar.set(name, value ?? "");
    },
    delete: (name: string) => jar.delete(name),
  }),
  headers: async () => requestHeaders,
}));

const { closeDb, db } = await import("@/lib/db/client");
const { closeRedis } = await import("@/lib/redis/client");
const { route } = await import("@/lib/http/api");
const { login } = await import("./login");
const { requireRole } = await import("./principal");
const { SESSION_COOKIE } = await import("./session");
const { ensureBootstrap, upsertUser } = await import("./users");
const { logger } = await import("@/lib/log");

const username = `logs-${randomBytes(4).toString("hex")}`;
const everything = () => logged.join("");

function expectNoSecret(text: string) {
  for (const [name, value] of Object.entries(SECRETS)) expect(text, `${name} leaked`).not.toContain(value);
}

beforeAll(async () => {
  await upsertUser({ username, role: "operator", password: SECRETS.password });
  await ensureBootstrap({ bootstrapToken: SECRETS.bootstrapToken });
});

afterAll(async () => {
  await db().user.deleteMany({ where: { username } });
  await closeRedis();
  await closeDb();
});

describe("no secret in the logs", () => {
  it("signing in with a wrong and then the right password, and using the session and the token, logs no secret", async () => {
    requestHeaders.set("x-forwarded-for", "203.0.113.9");
    expect(await login({ username, password: SECRETS.wrongPassword }, "203.0.113.9")).toEqual({ type: "invalid" });
    expect(await login({ username, password: SECRETS.password }, "203.0.113.9")).toEqual({ type: "ok", username });
    expect(jar.get(SESSION_COOKIE), "a sealed session cookie was set").toBeTruthy();

    // The signed-in session, then the bootstrap token, each with the other credential present.
    requestHeaders.set("cookie", `${SESSION_COOKIE}=${jar.get(SESSION_COOKIE)}`);
    expect((await requireRole("operator")).via).toBe("session");
    requestHeaders.set("authorization", `Bearer ${SECRETS.bootstrapToken}`);
    expect((await requireRole("operator")).via).toBe("token");

    // An unexpected error that carries the request and the body it failed on: logged, redacted.
    const failing = route(
      "operator",
      async (request) => {
        const body = (await request.json()) as Record<string, unknown>;
        throw Object.assign(new Error("the upstream service refused the request"), {
          config: { headers: Object.fromEntries(request.headers), body },
          password: body.password,
        });
      },
      "POST /test",
    );
    const response = await failing(
      new Request("http://localhost/test", {
        method: "POST",
        headers: {
          authorization: `Bearer ${SECRETS.bootstrapToken}`,
          cookie: `${SESSION_COOKIE}=${jar.get(SESSION_COOKIE)}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ username, password: SECRETS.password }),
      }),
      {},
    );
    expect(response.status).toBe(500);
    expectNoSecret(await response.text());

    // What a careless caller might log directly.
    logger("test").info(
      {
        user: { username, password: SECRETS.password },
        req: { headers: { authorization: `Bearer ${SECRETS.bootstrapToken}`, cookie: "x" } },
      },
      "sign-in",
    );

    const text = everything();
    expect(text, "the error line was written").toContain("unhandled error in route handler");
    expect(text).toContain("[redacted]");
    expectNoSecret(text);
  });

  it("the users command line never prints a password it was given, at any log level", () => {
    const out = execFileSync(
      process.execPath,
      ["--import", "tsx", "scripts/users.ts", "add", username, "--role", "operator", "--password", SECRETS.password],
      {
        env: { ...process.env, LOG_LEVEL: "trace" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    ).toString();
    expect(out).toContain(`User "${username}" (operator) is ready.`);
    expectNoSecret(out);
  });
});
