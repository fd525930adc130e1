import { randomBytes } from "node:crypto";
import { afterAll, beforeEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import type { Principal } from "@/lib/auth/roles";
import { awayFromMinuteEdge } from "@/test/helpers/wait";

// The caller of "this request", as the auth code would find it; and the pages an action redraws.
const caller = vi.hoisted(() => ({ principal: null as Principal | null }));
const redrawn = vi.hoisted(() => [] as string[]);
vi.mock("@/lib/auth/principal", async () => {
  const { Forbidden, Unauthenticated } = await import("@/lib/auth/errors");
  const { hasRole } = await import("@/lib/auth/roles");
  return {
    currentPrincipal: async () => caller.principal,
    requireRole: async (role: "viewer" | "operator") => {
      if (!caller.principal) throw new Unauthenticated();
      if (!hasRole(caller.principal, role))
        throw new Forbidden(`This needs the ${role} role; you are signed in as ${caller.principal.role}.`);
      return caller.principal;
    },
  };
});
// The socket peer, as the web process stamps it (lib/security/peer-address.ts).
vi.mock("next/headers", () => ({ headers: async () => new Headers({ "x-bounded-peer-address": "203.0.113.9" }) }));
vi.mock("next/cache", () => ({ revalidatePath: (path: string) => void redrawn.push(path) }));

const { closeDb, db } = await import("@/lib/db/client");
const { operatorAction, operatorRoute } = await import("./operator");
const { TenantBeingDeleted } = await import("@/lib/tenants/being-deleted");
(await import("@/lib/security/peer-address")).installPeerAddressStamp();
type Described = import("./operator").Described;

const operator: Principal = { userId: "u-op", username: "op-helper", role: "operator", via: "token" };
const viewer: Principal = { userId: "u-view", username: "viewer-helper", role: "viewer", via: "token" };

// The audit log refuses deletes: each test writes under an action name of its own.
let action = "";
beforeEach(() => {
  action = `test.operator.${randomBytes(4).toString("hex")}`;
  caller.principal = operator;
  redrawn.length = 0;
});

afterAll(async () => {
  await closeDb();
});

/** Anonymous refusals are counted per address, route (here: the action) and minute; the first of a minute is also an entry. */
const anonymousRefusals = async () =>
  (
    await db().auditRefusalTally.findMany({
      where: { route: { in: [`POST /test/${action}`, `action ${action}`] } },
      select: { address: true, status: true, count: true },
    })
  ).map(({ address, status, count }) => ({ address, status, count }));

const entries = () =>
  db().auditEntry.findMany({
    where: { action },
    orderBy: { id: "asc" },
    select: { actor: true, result: true, message: true, target: true, params: true, clientAddress: true },
  });

/** A use case with one expected failure, as the lib functions return them. */
type Outcome =
  | { type: "done"; id: string; parts: number }
  | { type: "job_not_terminal"; status: string }
  | { type: "queue_unavailable"; message: string };
function describeOutcome(r: Outcome): Described {
  switch (r.type) {
    case "done":
      return { ok: true, status: 202, code: "done", message: `Done in ${r.parts} parts.` };
    case "job_not_terminal":
      return {
        ok: false,
        status: 409,
        code: "job_not_terminal",
        message: `The job is ${r.status}: wait for it to end.`,
      };
    case "queue_unavailable":
      return {
        ok: false,
        error: true,
        status: 503,
        code: "queue_unavailable",
        message: "Try again in a minute.",
        audit: `failed: ${r.message}`,
      };
  }
}

const schema = z.object({ parts: z.number().int().min(2) }).strict();

function declare(run: (parts: number, id: string) => Promise<Outcome>) {
  const lib = vi.fn(run);
  const POST = operatorRoute({
    name: `POST /test/${action}`,
    action,
    input: { body: schema, example: '{ "parts": 2 }' },
    target: (_input, { id }: { id: string }) => id,
    run: (input, { params }) => lib(input.parts, params.id),
    describe: describeOutcome,
  });
  const call = (body: string, headers: Record<string, string> = { "content-type": "application/json" }) =>
    POST(new Request("http://localhost/test/job-1", { method: "POST", body, headers }), {
      params: Promise.resolve({ id: "job-1" }),
    });
  return { lib, call };
}

describe("operatorRoute", () => {
  it("a caller who is not signed in is refused with 401 and an audit entry, and the lib function is never called", async () => {
    caller.principal = null;
    const { lib, call } = declare(async (parts, id) => ({ type: "done", id, parts }));
    await awayFromMinuteEdge();
    const response = await call('{ "parts": 3 }');
    expect(response.status).toBe(401);
    expect((await response.json()).error.code).toBe("unauthenticated");
    expect(lib).not.toHaveBeenCalled();
    expect(await entries()).toEqual([
      {
        actor: "anonymous",
        result: "refused",
        message: "refused: not signed in",
        target: "job-1",
        params: { parts: 3 },
        clientAddress: "203.0.113.9",
      },
    ]);
    // More of the same in this minute are counted, not written.
    expect((await call('{ "parts": 3 }')).status).toBe(401);
    expect(await entries()).toHaveLength(1);
    expect(await anonymousRefusals()).toEqual([{ address: "203.0.113.9", status: 401, count: 2 }]);
  });

  it("a viewer is refused with 403 and an audit entry naming the role, and the lib function is never called", async () => {
    caller.principal = viewer;
    const { lib, call } = declare(async (parts, id) => ({ type: "done", id, parts }));
    const response = await call('{ "parts": 3 }');
    expect(response.status).toBe(403);
    expect(lib).not.toHaveBeenCalled();
    expect(await entries()).toMatchObject([
      {
        actor: "viewer-helper",
        result: "refused",
        message: "refused: This needs the operator role; you are signed in as viewer.",
      },
    ]);
  });

  it("a refused caller hears 401 before any word about a bad body", async () => {
    caller.principal = null;
    const { call } = declare(async (parts, id) => ({ type: "done", id, parts }));
    expect((await call("{not json")).status).toBe(401);
    expect(await entries()).toMatchObject([
      { result: "refused", message: "refused: not signed in", params: { invalid: true } },
    ]);
  });

  it("an invalid body is audited as refused and answered 422 with its issues, without calling the lib function", async () => {
    const { lib, call } = declare(async (parts, id) => ({ type: "done", id, parts }));
    const response = await call('{ "parts": 1, "force": true }');
    expect(response.status).toBe(422);
    const body = await response.json();
    expect(body.error.code).toBe("invalid_request");
    expect(body.error.issues.map((i: { path: string }) => i.path).sort()).toEqual(["", "parts"]);
    expect(lib).not.toHaveBeenCalled();
    expect(await entries()).toEqual([
      {
        actor: "op-helper",
        result: "refused",
        message: "refused: invalid request",
        target: "job-1",
        params: { invalid: true },
        clientAddress: "203.0.113.9",
      },
    ]);
  });

  it("a body that is not JSON is audited as refused and answered 400 with an example of what to send", async () => {
    const { lib, call } = declare(async (parts, id) => ({ type: "done", id, parts }));
    const response = await call("{parts: 3");
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: { code: "bad_json", message: 'The body is not valid JSON. Send { "parts": 2 }.' },
    });
    expect(lib).not.toHaveBeenCalled();
    expect(await entries()).toMatchObject([{ result: "refused", message: "refused: invalid request" }]);
  });

  it("new work for a tenant being deleted is answered 409 tenant_being_deleted and audited once as refused", async () => {
    const since = new Date("2026-12-06T12:00:00.000Z");
    const { call } = declare(async () => {
      throw new TenantBeingDeleted("acme", since);
    });
    const response = await call('{ "parts": 3 }');
    expect(response.status).toBe(409);
    expect(await response.json()).toEqual({
      error: {
        code: "tenant_being_deleted",
        message: expect.stringMatching(
          /^acme is being deleted \(since 2026-12-06T12:00:00\.000Z\): it takes no new work\./,
        ),
      },
    });
    expect(await entries()).toMatchObject([
      { result: "refused", message: expect.stringMatching(/^acme is being deleted/) },
    ]);
  });

  it("a tagged failure is answered with its status, code and text, and audited as refused with the same text", async () => {
    const { lib, call } = declare(async () => ({ type: "job_not_terminal", status: "running" }));
    const response = await call('{ "parts": 3 }');
    expect(lib).toHaveBeenCalledWith(3, "job-1");
    expect(response.status).toBe(409);
    expect(await response.json()).toEqual({
      error: { code: "job_not_terminal", message: "The job is running: wait for it to end." },
    });
    expect(await entries()).toMatchObject([
      { result: "refused", message: "The job is running: wait for it to end.", params: { parts: 3 } },
    ]);
  });

  it("a failure that is not the caller's doing is audited as an error with its own words, and the caller gets the description's", async () => {
    const { call } = declare(async () => ({ type: "queue_unavailable", message: "Redis is down" }));
    const response = await call('{ "parts": 2 }');
    expect(response.status).toBe(503);
    expect((await response.json()).error.message).toBe("Try again in a minute.");
    expect(await entries()).toMatchObject([{ result: "error", message: "failed: Redis is down" }]);
  });

  it("a success answers the result with its message and leaves one ok entry", async () => {
    const { call } = declare(async (parts, id) => ({ type: "done", id, parts }));
    const response = await call('{ "parts": 4 }');
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ type: "done", id: "job-1", parts: 4, message: "Done in 4 parts." });
    expect(await entries()).toEqual([
      {
        actor: "op-helper",
        result: "ok",
        message: "Done in 4 parts.",
        target: "job-1",
        params: { parts: 4 },
        clientAddress: "203.0.113.9",
      },
    ]);
  });

  it("a bug in the lib call is audited as an error and answered 500 without its text", async () => {
    const { call } = declare(async () => {
      throw new Error("connection to 10.0.0.5 refused");
    });
    const response = await call('{ "parts": 2 }');
    expect(response.status).toBe(500);
    expect(JSON.stringify(await response.json())).not.toContain("10.0.0.5");
    expect(await entries()).toMatchObject([{ result: "error", message: "failed: connection to 10.0.0.5 refused" }]);
  });

  it("a read without an audit action still refuses a viewer on the server, and records only that refusal", async () => {
    const lib = vi.fn(async () => ({ type: "done" as const, id: "job-1", parts: 2 }));
    const GET = operatorRoute({
      name: "GET /test",
      input: { query: z.object({ parts: z.coerce.number() }).strip() },
      run: lib,
      describe: describeOutcome,
    });
    const get = (query: string) => GET(new Request(`http://localhost/test?${query}`), { params: Promise.resolve({}) });
    const before = await db().auditEntry.count();
    caller.principal = viewer;
    expect((await get("parts=2")).status).toBe(403);
    expect(lib).not.toHaveBeenCalled();
    caller.principal = operator;
    expect((await get("parts=many")).status).toBe(422);
    expect((await get("parts=2&other=1")).status).toBe(202);
    expect(await db().auditEntry.count()).toBe(before + 1);
    expect(
      await db().auditEntry.findFirst({ orderBy: { id: "desc" }, select: { actor: true, action: true, target: true } }),
    ).toEqual({ actor: "viewer-helper", action: "request.refused", target: "GET /test" });
  });
});

describe("operatorAction", () => {
  function declareAction(run: (parts: number) => Promise<Outcome>) {
    const lib = vi.fn(run);
    const act = operatorAction({
      action,
      fields: (form) => ({ jobId: form.get("jobId"), parts: form.get("parts") ?? "" }),
      schema: z.object({
        jobId: z.string(),
        parts: z
          .string()
          .transform(Number)
          .pipe(z.number({ error: "The number of parts must be a number" }).int().min(2, "At least 2 parts")),
      }),
      target: (raw) => (typeof raw.jobId === "string" ? raw.jobId : null),
      params: (input) => ({ parts: input.parts }),
      run: (input) => lib(input.parts),
      describe: describeOutcome,
      revalidate: (raw) => (typeof raw.jobId === "string" ? `/jobs/${raw.jobId}` : null),
    });
    const submit = (fields: Record<string, string>) => {
      const form = new FormData();
      for (const [k, v] of Object.entries(fields)) form.set(k, v);
      return act({}, form);
    };
    return { lib, submit };
  }

  it("a caller who is not signed in gets the refusal on the form, audited, with nothing called and nothing redrawn", async () => {
    caller.principal = null;
    const { lib, submit } = declareAction(async (parts) => ({ type: "done", id: "job-1", parts }));
    expect(await submit({ jobId: "job-1", parts: "3" })).toEqual({
      ok: false,
      message: "Sign in, or send an API token as `Authorization: Bearer <token>`.",
    });
    expect(lib).not.toHaveBeenCalled();
    expect(redrawn).toEqual([]);
    expect(await entries()).toMatchObject([
      {
        actor: "anonymous",
        result: "refused",
        message: "refused: not signed in",
        target: "job-1",
        params: { parts: 3 },
      },
    ]);
  });

  it("an invalid form is audited as refused with its first problem, shown on the form, without calling the lib function", async () => {
    const { lib, submit } = declareAction(async (parts) => ({ type: "done", id: "job-1", parts }));
    expect(await submit({ jobId: "job-1", parts: "1" })).toEqual({ ok: false, message: "At least 2 parts" });
    expect(lib).not.toHaveBeenCalled();
    expect(redrawn).toEqual(["/jobs/job-1"]);
    expect(await entries()).toMatchObject([
      { result: "refused", message: "refused: At least 2 parts", params: { invalid: true } },
    ]);
  });

  it("a tagged failure shows its text on the form and is audited as refused; a success says ok and redraws the page", async () => {
    const refused = declareAction(async () => ({ type: "job_not_terminal", status: "queued" }));
    expect(await refused.submit({ jobId: "job-1", parts: "3" })).toEqual({
      ok: false,
      message: "The job is queued: wait for it to end.",
    });
    const done = declareAction(async (parts) => ({ type: "done", id: "job-1", parts }));
    expect(await done.submit({ jobId: "job-1", parts: "3" })).toEqual({ ok: true, message: "Done in 3 parts." });
    expect(redrawn).toEqual(["/jobs/job-1", "/jobs/job-1"]);
    expect(await entries()).toMatchObject([
      { result: "refused", message: "The job is queued: wait for it to end." },
      { result: "ok", message: "Done in 3 parts." },
    ]);
  });
});
