import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { awayFromMinuteEdge, waitFor } from "@/test/helpers/wait";

// "This request", as Next.js would give it to the auth code: its headers and its cookie jar.
const request = vi.hoisted(() => ({ headers: new Headers(), cookies: new Map<string, string>() }));
vi.mock("next/headers", () => ({
  headers: async () => request.headers,
  cookies: async () => ({
    get: (name: string) => (request.cookies.has(name) ? { name, value: request.cookies.get(name)! } : undefined),
    set: (name: string | { name: string; value: string }, value?: string) => {
      if (typeof name === "object") request.cookies.set(name.name, name.value);
      else request.cookies.set(name, value ?? "");
    },
    delete: (name: string) => request.cookies.delete(name),
    has: (name: string) => request.cookies.has(name),
  }),
}));
vi.mock("next/cache", () => ({ revalidatePath: () => undefined }));
// The password check, counted: how many attempts reached it. The throttling tests swap in a
// quick "wrong" so thirty scrypt runs do not slow them down.
const realVerify = vi.hoisted(() => ({
  fn: undefined as unknown as (password: string, stored: string) => Promise<boolean>,
}));
vi.mock("@/lib/auth/passwords", async (original) => {
  const real = await original<typeof import("@/lib/auth/passwords")>();
  realVerify.fn = real.verifyPassword;
  return { ...real, verifyPassword: vi.fn(real.verifyPassword) };
});

const { closeDb, db } = await import("@/lib/db/client");
const { closeRedis, key, redis } = await import("@/lib/redis/client");
const { verifyPassword } = await import("@/lib/auth/passwords");
const { LOGIN_LIMITS, login, logout } = await import("@/lib/auth/login");
const { principalFromSession, SESSION_COOKIE } = await import("@/lib/auth/session");
const { changePassword, issueToken, upsertUser } = await import("@/lib/auth/users");
const { clientAddress } = await import("@/lib/security/client-address");
const { route } = await import("@/lib/http/api");
const { operatorRoute } = await import("@/lib/http/operator");
const { installPeerAddressStamp, PEER_HEADER } = await import("./peer-address");
const { parseTrustedProxies, resolveClientAddress } = await import("./trusted-proxies");
const { withUploadSlot } = await import("@/lib/http/upload-limits");
const { POST: formLoginRoute } = await import("@/app/api/auth/login/route");
const { GET: previewRoute } = await import("@/app/api/marketplace/preview/route");
const { z } = await import("zod");

installPeerAddressStamp();

const HOST = "localhost:3000";
/** A fresh request from `peer` (the socket address the server stamped). */
function newRequest(peer: string, extra: Record<string, string> = {}) {
  request.headers = new Headers({ host: HOST, [PEER_HEADER]: peer, ...extra });
}
const run = randomBytes(3).toString("hex");
/**
 * Addresses no other test of this run uses, nor (almost surely) an earlier run within the
 * throttle's window: from a random start among 62,500 (a start among 200 let a run soon after
 * another meet the addresses it had throttled, and every sign-in of a test was refused).
 */
let addressSeq = parseInt(run, 16) % 62_500;
const freshAddress = () => {
  const n = addressSeq++ % 62_500;
  return `198.51.${Math.floor(n / 250)}.${n % 250}`;
};

async function makeUser(role: "viewer" | "operator") {
  const username = `sec-${role}-${run}-${randomBytes(2).toString("hex")}`;
  const password = "correct-horse-battery";
  const { user } = await upsertUser({ username, role, password });
  return { ...user, password };
}

const post = (
  handler: (r: Request, ctx: never) => Promise<Response>,
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
) =>
  handler(
    new Request(`http://${HOST}${url}`, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json", ...headers },
    }),
    {} as never,
  );

beforeEach(() => {
  vi.mocked(verifyPassword).mockClear();
  request.cookies = new Map();
});

afterAll(async () => {
  await closeRedis();
  await closeDb();
});

describe("sign-in throttling", () => {
  beforeEach(() => {
    vi.mocked(verifyPassword).mockImplementation(async () => false);
  });
  afterEach(() => {
    vi.mocked(verifyPassword).mockImplementation(realVerify.fn);
  });

  it("30 parallel wrong passwords for one account: at most the limit reach the password check, the rest are 429 with Retry-After", async () => {
    const user = await makeUser("viewer");
    newRequest(freshAddress());
    const answers = await Promise.all(
      Array.from({ length: 30 }, () =>
        post(formLoginRoute, "/api/auth/login", { username: user.username, password: "wrong-guess" }),
      ),
    );
    const statuses = answers.map((a) => a.status);
    expect(vi.mocked(verifyPassword).mock.calls.length).toBeLessThanOrEqual(LOGIN_LIMITS.perUser);
    expect(statuses.filter((s) => s === 401)).toHaveLength(LOGIN_LIMITS.perUser);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30 - LOGIN_LIMITS.perUser);
    const refused = answers.find((a) => a.status === 429)!;
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await refused.json()).error.code).toBe("throttled");
    // The right password is refused too while the window lasts.
    vi.mocked(verifyPassword).mockImplementation(realVerify.fn);
    const right = await post(formLoginRoute, "/api/auth/login", { username: user.username, password: user.password });
    expect(right.status).toBe(429);
  });

  it("parallel guesses over many accounts from one address stop at the per-address limit", async () => {
    const guesser = freshAddress();
    const results = await Promise.all(
      Array.from({ length: 45 }, (_, i) => login({ username: `nobody-${run}-${i}`, password: "x" }, guesser)),
    );
    expect(vi.mocked(verifyPassword).mock.calls.length).toBeLessThanOrEqual(LOGIN_LIMITS.perAddress);
    expect(results.filter((r) => r.type === "throttled")).toHaveLength(45 - LOGIN_LIMITS.perAddress);
  });

  it("a forged X-Forwarded-For from an untrusted peer does not change the address the limit counts", async () => {
    const peer = freshAddress();
    for (let i = 0; i < LOGIN_LIMITS.perAddress; i++) {
      newRequest(peer, { "x-forwarded-for": `10.9.${i}.1` });
      expect(await clientAddress()).toBe(peer);
      const answer = await post(formLoginRoute, "/api/auth/login", {
        username: `nobody-${run}-xff-${i}`,
        password: "x",
      });
      expect(answer.status).toBe(401);
    }
    newRequest(peer, { "x-forwarded-for": "10.9.250.1" });
    expect(
      (await post(formLoginRoute, "/api/auth/login", { username: `nobody-${run}-xff-last`, password: "x" })).status,
    ).toBe(429);
  });
});

describe("the web process's request hook", () => {
  it("stamps the socket peer over any header a client sent, and answers a raw address that does not decode with 400", async () => {
    const http = await import("node:http");
    const seen: (string | undefined)[] = [];
    const server = http.createServer((req, res) => {
      seen.push(req.headers[PEER_HEADER] as string | undefined);
      res.end("ok");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    // node:http sends the path as written: the raw escapes reach the server.
    const get = (path: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(
          { host: "127.0.0.1", port, path, headers: { [PEER_HEADER]: "6.6.6.6", "x-forwarded-for": "6.6.6.6" } },
          (res) => {
            let body = "";
            res.on("data", (c) => (body += c));
            res.on("end", () => resolve({ status: res.statusCode!, body }));
          },
        );
        req.on("error", reject);
        req.end();
      });
    try {
      expect(await get("/jobs?q=50%25")).toEqual({ status: 200, body: "ok" });
      expect(seen).toEqual(["127.0.0.1"]);
      for (const path of ["/jobs?q=%", "/api/jobs/%E0%A4%A", "/api/jobs?q=%00", "/a%00b", "/jobs?q=%zz"]) {
        const answer = await get(path);
        expect(answer.status, path).toBe(400);
        expect(JSON.parse(answer.body).error.code).toBe("malformed_input");
      }
      expect(seen).toHaveLength(1);
    } finally {
      server.close();
    }
  });
});

describe("client address", () => {
  const trusted = parseTrustedProxies("10.0.0.0/8, ::1");
  it("believes X-Forwarded-For only from a trusted proxy, and only up to the first untrusted hop", () => {
    expect(resolveClientAddress("198.51.100.7", "1.2.3.4", trusted)).toBe("198.51.100.7");
    expect(resolveClientAddress("10.1.2.3", "1.2.3.4", trusted)).toBe("1.2.3.4");
    expect(resolveClientAddress("::ffff:10.1.2.3", "6.6.6.6, 1.2.3.4, 10.4.4.4", trusted)).toBe("1.2.3.4");
    expect(resolveClientAddress("::1", undefined as unknown as null, trusted)).toBe("::1");
    expect(resolveClientAddress("10.1.2.3", "not-an-ip", trusted)).toBe("10.1.2.3");
    expect(resolveClientAddress(null, "1.2.3.4", trusted)).toBe("unknown");
    expect(resolveClientAddress("10.1.2.3", "1.2.3.4", parseTrustedProxies(""))).toBe("10.1.2.3");
    expect(() => parseTrustedProxies("10.0.0.0/40")).toThrow(/prefix/);
  });
});

/** Signs in through the real login, leaving the sealed cookie in the jar; returns its value. */
async function signIn(user: { username: string; password: string }): Promise<string> {
  newRequest(freshAddress());
  request.cookies = new Map();
  expect((await login({ username: user.username, password: user.password }, freshAddress())).type).toBe("ok");
  return request.cookies.get(SESSION_COOKIE)!;
}
const withCookie = (cookie: string) => {
  request.cookies = new Map([[SESSION_COOKIE, cookie]]);
};

describe("server-side sessions", () => {
  it("a cookie captured before sign-out is refused after it", async () => {
    const user = await makeUser("viewer");
    const captured = await signIn(user);
    withCookie(captured);
    expect((await principalFromSession())?.username).toBe(user.username);
    await logout();
    withCookie(captured);
    expect(await principalFromSession()).toBeNull();
  });

  it("a password change ends every session of the user, and only that user's", async () => {
    const user = await makeUser("viewer");
    const other = await makeUser("viewer");
    const [a, b, c] = [await signIn(user), await signIn(user), await signIn(other)];
    await changePassword(user.username, "a-new-password-1");
    for (const cookie of [a, b]) {
      withCookie(cookie);
      expect(await principalFromSession()).toBeNull();
    }
    withCookie(c);
    expect((await principalFromSession())?.username).toBe(other.username);
  });
});

describe("cookie-signed requests from another origin", () => {
  const handler = route(
    "viewer",
    async (_r, _c, principal) => Response.json({ who: principal?.username }),
    "POST /test/state-change",
  );
  const call = () => handler(new Request(`http://${HOST}/test`, { method: "POST" }), {} as never);

  it("are refused with 403 (same site, other origin); the same origin and Bearer tokens work", async () => {
    const user = await makeUser("viewer");
    const cookie = await signIn(user);
    withCookie(cookie);
    const peer = freshAddress();

    newRequest(peer, { origin: "http://evil.localhost:3000", "sec-fetch-site": "same-site" });
    const refused = await call();
    expect(refused.status).toBe(403);
    expect((await refused.json()).error.message).toMatch(/came from http:\/\/evil\.localhost:3000, not from this site/);

    newRequest(peer, { origin: `http://${HOST}`, "sec-fetch-site": "same-origin" });
    expect((await call()).status).toBe(200);
    // A form post under Referrer-Policy: no-referrer: Origin null, and the browser says it is ours.
    newRequest(peer, { origin: "null", "sec-fetch-site": "same-origin" });
    expect((await call()).status).toBe(200);
    newRequest(peer, { origin: "null", "sec-fetch-site": "cross-site" });
    expect((await call()).status).toBe(403);

    const token = await issueToken(user.username, "test");
    newRequest(peer, {
      origin: "http://evil.localhost:3000",
      "sec-fetch-site": "same-site",
      authorization: `Bearer ${token}`,
    });
    expect((await call()).status).toBe(200);

    // The refusal is in the audit log, with who and from where.
    const entry = await db().auditEntry.findFirst({
      where: { actor: user.username, action: "request.refused" },
      orderBy: { id: "desc" },
    });
    expect(entry).toMatchObject({ result: "refused", target: "POST /test/state-change", clientAddress: peer });
  });
});

describe("refused calls in the audit log", () => {
  it("200 anonymous 401s from one address are a count of 200 and one or two audit entries, not 200", async () => {
    const name = `GET /test/flood-${run}`;
    const handler = route("viewer", async () => Response.json({}), name);
    const peer = freshAddress();
    newRequest(peer);
    const statuses = await Promise.all(
      Array.from({ length: 200 }, () => handler(new Request(`http://${HOST}/test`), {} as never).then((r) => r.status)),
    );
    expect(new Set(statuses)).toEqual(new Set([401]));
    const rows = await db().auditRefusalTally.findMany({ where: { address: peer, route: name } });
    expect(rows.length).toBeLessThanOrEqual(2); // a minute may turn during the flood
    expect(rows.reduce((n, r) => n + r.count, 0)).toBe(200);
    expect(rows[0]).toMatchObject({ status: 401 });
    // The first refusal of each minute is also an entry, so the log shows that it happened.
    // The route's name is this test's own, so no other test's entry (nor work an earlier test left
    // running, which reads the shared request headers late) can be counted here.
    const logged = await db().auditEntry.findMany({
      where: { target: name },
      select: { actor: true, action: true, target: true, result: true, clientAddress: true },
    });
    expect(logged.length).toBe(rows.length);
    expect(logged[0]).toEqual({
      actor: "anonymous",
      action: "request.refused",
      target: name,
      result: "refused",
      clientAddress: peer,
    });
  });

  it("anonymous calls to an operator route are counted (the first is an entry), a signed-in viewer's refusal is an entry of its own", async () => {
    const action = `test.refusal.${run}`;
    const POST = operatorRoute({
      name: "POST /test/op",
      action,
      run: async () => ({}),
      describe: () => ({ ok: true, status: 200, code: "ok", message: "done" }),
    });
    const peer = freshAddress();
    await awayFromMinuteEdge();
    newRequest(peer);
    for (let i = 0; i < 20; i++)
      expect(
        (await POST(new Request(`http://${HOST}/test/op`, { method: "POST" }), { params: Promise.resolve({}) })).status,
      ).toBe(401);
    expect(await db().auditEntry.count({ where: { action } })).toBe(1);
    expect(
      (await db().auditRefusalTally.findMany({ where: { address: peer, route: "POST /test/op" } })).reduce(
        (n, r) => n + r.count,
        0,
      ),
    ).toBe(20);

    const viewer = await makeUser("viewer");
    withCookie(await signIn(viewer));
    newRequest(peer);
    expect(
      (await POST(new Request(`http://${HOST}/test/op`, { method: "POST" }), { params: Promise.resolve({}) })).status,
    ).toBe(403);
    expect(
      await db().auditEntry.findMany({
        where: { action },
        select: { actor: true, result: true, clientAddress: true },
        orderBy: { id: "asc" },
      }),
    ).toEqual([
      { actor: "anonymous", result: "refused", clientAddress: peer },
      { actor: viewer.username, result: "refused", clientAddress: peer },
    ]);
  });
});

describe("malformed input", () => {
  const GET = route(
    "public",
    async (r) => Response.json({ q: new URL(r.url).searchParams.get("q") }),
    "GET /test/input",
  );
  const POST = operatorRoute({
    name: "POST /test/input",
    action: `test.input.${run}`,
    input: { body: z.object({ name: z.string() }), example: '{ "name": "x" }' },
    run: async () => ({}),
    describe: () => ({ ok: true, status: 200, code: "ok", message: "done" }),
  });

  it.each([
    "/api/jobs?q=%00",
    "/api/jobs/%E0%A4%A",
    "/api/jobs?q=%",
    "/api/jobs?q=%zz",
    "/api/jobs/a%00b",
    "/api/jobs?%E0=1",
  ])("%s is a 400, never a 500", async (path) => {
    newRequest(freshAddress());
    const answer = await GET(new Request(`http://${HOST}${path}`), {} as never);
    expect(answer.status).toBe(400);
    expect((await answer.json()).error.code).toBe("malformed_input");
  });

  it("well-formed escapes pass", async () => {
    newRequest(freshAddress());
    const answer = await GET(new Request(`http://${HOST}/api/jobs?q=${encodeURIComponent("50% off ü")}`), {} as never);
    expect(await answer.json()).toEqual({ q: "50% off ü" });
  });

  it("a JSON body with a NUL byte in a field is a 400", async () => {
    const operator = await makeUser("operator");
    const token = await issueToken(operator.username, "test");
    newRequest(freshAddress(), { authorization: `Bearer ${token}` });
    const answer = await POST(
      new Request(`http://${HOST}/test/input`, {
        method: "POST",
        body: '{ "name": "a\\u0000b" }',
        headers: { "content-type": "application/json" },
      }),
      { params: Promise.resolve({}) },
    );
    expect(answer.status).toBe(400);
    expect((await answer.json()).error.code).toBe("nul_byte");
  });
});

describe("upload limits per caller", () => {
  const limits = { perMinute: 5, concurrent: 2, inflightBytes: 60 * 1024 * 1024 };
  /** Resolves once `caller` holds `n` upload slots (its in-flight set in Redis). */
  const uploadsInFlight = (caller: string, n: number) =>
    waitFor(async () => (await redis().zcard(key("uploads", "inflight", caller))) === n, {
      what: `${n} upload(s) of ${caller} in flight`,
      timeoutMs: 5_000,
    });
  const held = () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    return { gate, release };
  };

  it("at most 2 at once: a third parallel upload is a 429 with Retry-After; slots come back when uploads end, also on error", async () => {
    const caller = `user:test-${run}-a`;
    const { gate, release } = held();
    const running = [
      withUploadSlot(caller, 1000, () => gate, limits),
      withUploadSlot(caller, 1000, () => gate, limits),
    ];
    await uploadsInFlight(caller, 2);
    const refused = await withUploadSlot(caller, 1000, async () => "ran", limits).catch((e: unknown) => e);
    expect(refused).toMatchObject({
      status: 429,
      code: "too_many_uploads_in_flight",
      headers: { "Retry-After": expect.stringMatching(/^\d+$/) },
    });
    // Another caller is not affected.
    expect(await withUploadSlot(`user:test-${run}-b`, 1000, async () => "ran", limits)).toBe("ran");
    release();
    await Promise.all(running);
    await expect(withUploadSlot(caller, 1000, async () => Promise.reject(new Error("boom")), limits)).rejects.toThrow(
      "boom",
    );
    expect(await withUploadSlot(caller, 1000, async () => "ran", limits)).toBe("ran");
  });

  it("a slot is leased, not held for ever: a live upload renews it past its lease; one whose process died frees it within the lease", async () => {
    const caller = `user:test-${run}-lease`;
    const lease = { ms: 400, renewMs: 100 };
    const one = { ...limits, concurrent: 1 };
    const { gate, release } = held();
    const long = withUploadSlot(caller, 1000, () => gate, one, lease);
    await uploadsInFlight(caller, 1);
    // Three leases later the upload is still going: its slot is still its own.
    await new Promise((r) => setTimeout(r, 3 * lease.ms));
    await expect(withUploadSlot(caller, 1000, async () => "ran", one, lease)).rejects.toMatchObject({
      code: "too_many_uploads_in_flight",
    });
    release();
    await long;

    // The lease an upload takes: a process that dies mid-upload stops renewing it, and its slot is
    // free again within 30 s (a web restart must not refuse the caller's uploads for minutes).
    const second = held();
    const acquired = withUploadSlot(caller, 1000, () => second.gate, one);
    await uploadsInFlight(caller, 1);
    const [, score] = await redis().zrange(key("uploads", "inflight", caller), "0", "-1", "WITHSCORES");
    expect(Number(score) - Date.now()).toBeLessThanOrEqual(30_000);
    second.release();
    await acquired;
  });

  it("bytes in flight together are capped; uploads per minute too", async () => {
    const caller = `address:test-${run}-bytes`;
    const { gate, release } = held();
    const big = withUploadSlot(caller, 50 * 1024 * 1024, () => gate, limits);
    await uploadsInFlight(caller, 1);
    await expect(withUploadSlot(caller, 20 * 1024 * 1024, async () => "ran", limits)).rejects.toMatchObject({
      status: 429,
    });
    release();
    await big;

    const rate = `address:test-${run}-rate`;
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        withUploadSlot(rate, 10, async () => "ok", { ...limits, concurrent: 100 }).catch(
          (e: { code: string }) => e.code,
        ),
      ),
    );
    expect(results.filter((r) => r === "ok")).toHaveLength(5);
    expect(results.filter((r) => r === "too_many_uploads")).toHaveLength(3);
  });

  it("the imports route holds a slot while the body arrives: a third parallel upload of one address is refused", async () => {
    const { POST } = await import("@/app/api/imports/route");
    const peer = freshAddress();
    newRequest(peer);
    const gates = [held(), held()];
    const slow = gates.map(({ gate }) =>
      POST(
        new Request(`http://${HOST}/api/imports?tenant=sec-${run}`, {
          method: "POST",
          headers: { "content-type": "text/csv" },
          // A body still arriving: the upload is in flight until the gate opens.
          body: new ReadableStream({
            async pull(c) {
              await gate;
              c.enqueue(new TextEncoder().encode("date,amount\n"));
              c.close();
            },
          }),
          duplex: "half",
        } as RequestInit),
        {} as never,
      ),
    );
    await uploadsInFlight(`address:${peer}`, 2);
    const third = await POST(
      new Request(`http://${HOST}/api/imports?tenant=sec-${run}`, {
        method: "POST",
        headers: { "content-type": "text/csv" },
        body: "x",
      }),
      {} as never,
    );
    expect(third.status).toBe(429);
    expect(third.headers.get("retry-after")).toMatch(/^\d+$/);
    expect((await third.json()).error.message).toMatch(/upload\(s\) in progress/);
    for (const g of gates) g.release();
    for (const answer of await Promise.all(slow)) expect(answer.status).not.toBe(429);
  });
});

describe("marketplace previews", () => {
  it("a viewer's previews read the last sync and leave the tenant's rate-limit bucket untouched", async () => {
    const viewer = await makeUser("viewer");
    const token = await issueToken(viewer.username, "test");
    const tenant = `sec-preview-${run}`;
    newRequest(freshAddress(), { authorization: `Bearer ${token}` });
    const bucketKeys = async () => (await redis().keys(`${key()}*${tenant}*`)).sort();
    const before = await bucketKeys();
    for (let i = 0; i < 5; i++) {
      const answer = await previewRoute(
        new Request(`http://${HOST}/api/marketplace/preview?tenant=${tenant}&family=statistics`),
        {} as never,
      );
      expect(answer.status).toBe(200);
      expect(await answer.json()).toMatchObject({ source: "last_sync", items: [], syncedAt: null });
    }
    expect(await bucketKeys()).toEqual(before);
  });
});
