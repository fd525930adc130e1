import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";

/**
 * Every API request through `route()` writes one access log line (method, route pattern, status,
 * duration, principal, request id, trace id) and answers with its request id. The JSON lines are
 * captured at the pino destination.
 */
vi.hoisted(() => {
  process.env.LOG_LEVEL = "info";
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
  const captured = Object.assign((options: import("pino").LoggerOptions) => real(options, sink), real);
  return { default: captured };
});
/** The request's headers as `next/headers` gives them to the auth code. */
const requestHeaders = vi.hoisted(() => ({ current: new Headers() }));
vi.mock("next/headers", () => ({
  cookies: async () => ({
    get: () => undefined,
    getAll: () => [],
    has: () => false,
    set: () => undefined,
    delete: () => undefined,
  }),
  headers: async () => requestHeaders.current,
}));

const { closeDb, db } = await import("@/lib/db/client");
const { closeRedis } = await import("@/lib/redis/client");
const { route, errorResponse } = await import("@/lib/http/api");
const { ensureBootstrap } = await import("@/lib/auth/users");
const { hashToken } = await import("@/lib/auth/tokens");
const livez = await import("@/app/api/livez/route");

const token = `bnd_requestlog_${randomBytes(12).toString("hex")}`;

interface AccessLine {
  name: string;
  msg: string;
  requestId: string;
  method: string;
  route: string;
  status: number;
  durationMs: number;
  principal: string;
  via?: string;
  traceId: string;
}

function accessLines(): AccessLine[] {
  return logged
    .join("")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AccessLine)
    .filter((l) => l.name === "http" && l.msg === "request");
}

function call(
  handler: (request: Request, ctx: unknown) => Promise<Response>,
  url: string,
  headers: Record<string, string> = {},
) {
  requestHeaders.current = new Headers(headers);
  return handler(new Request(url, { headers }), { params: Promise.resolve({ id: "42" }) });
}

beforeAll(async () => {
  await ensureBootstrap({ bootstrapToken: token });
});
beforeEach(() => {
  logged.length = 0;
});
afterAll(async () => {
  await closeRedis();
  await closeDb();
});

describe("access log and request id", () => {
  const show = route("public", async () => errorResponse(404, "not_found", "No such thing."), "GET /api/things/:id");

  it("writes one line per request with the route pattern, status, duration and an anonymous caller, and keeps a well-formed incoming request id", async () => {
    const response = await call(show, "http://localhost/api/things/42", { "x-request-id": "edge-7f3a9c21-req" });
    expect(response.status).toBe(404);
    expect(response.headers.get("x-request-id")).toBe("edge-7f3a9c21-req");
    const lines = accessLines();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      method: "GET",
      route: "/api/things/[id]",
      status: 404,
      principal: "anonymous",
      requestId: "edge-7f3a9c21-req",
    });
    expect(lines[0]!.durationMs).toBeGreaterThanOrEqual(0);
    expect(lines[0]!.traceId).toMatch(/^[0-9a-f]{32}$/);
  });

  it("generates a request id when the incoming one is missing or malformed", async () => {
    const bad = await call(show, "http://localhost/api/things/42", { "x-request-id": "two words\u0007" });
    const none = await call(show, "http://localhost/api/things/42");
    const ids = [bad.headers.get("x-request-id"), none.headers.get("x-request-id")];
    for (const id of ids) expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(ids[0]).not.toBe(ids[1]);
    expect(accessLines().map((l) => l.requestId)).toEqual(ids);
  });

  it("names the principal of an authenticated call, and continues the caller's trace", async () => {
    const viewerOnly = route("viewer", async () => Response.json({ ok: true }), "GET /api/secret-things");
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const response = await call(viewerOnly, "http://localhost/api/secret-things", {
      authorization: `Bearer ${token}`,
      traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
    });
    expect(response.status).toBe(200);
    const bootstrap = await db().apiToken.findUniqueOrThrow({
      where: { tokenHash: hashToken(token) },
      select: { user: { select: { username: true } } },
    });
    expect(accessLines()).toEqual([
      expect.objectContaining({
        status: 200,
        principal: bootstrap.user.username,
        via: "token",
        route: "/api/secret-things",
        traceId,
      }),
    ]);
  });

  it("logs a refused call with its status and no principal", async () => {
    const viewerOnly = route("viewer", async () => Response.json({ ok: true }), "GET /api/secret-things");
    const response = await call(viewerOnly, "http://localhost/api/secret-things");
    expect(response.status).toBe(401);
    expect(accessLines()).toEqual([expect.objectContaining({ status: 401, principal: "anonymous" })]);
  });
});

describe("GET /api/livez", () => {
  it("answers 200 while the process runs, checks nothing else, and is logged like every route", async () => {
    const response = await livez.GET(new Request("http://localhost/api/livez"), {} as never);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "live" });
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(accessLines()).toEqual([expect.objectContaining({ route: "/api/livez", status: 200 })]);
  });
});
