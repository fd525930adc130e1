import { randomBytes } from "node:crypto";
import { afterAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { Principal } from "@/lib/auth/roles";

// The caller of "this request", as the auth code would find it.
const caller = vi.hoisted(() => ({ principal: null as Principal | null }));
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
vi.mock("next/headers", () => ({ headers: async () => new Headers({ "x-forwarded-for": "203.0.113.7" }) }));

const { closeDb, db } = await import("@/lib/db/client");
const { closeQueues } = await import("@/lib/queues/queues");
const { closeRedis } = await import("@/lib/redis/client");
const fail = await import("./fail/route");
const retry = await import("./retry/route");
const handled = await import("./handled/route");
const list = await import("../route");
const { Registry } = await import("prom-client");
const { createMetrics } = await import("@/lib/metrics/metrics");
const { countAwaitingOperatorByKind } = await import("@/lib/reports/stuck-awaiting");
const { getCustomerProgress } = await import("@/lib/progress/customer-progress");
const { runJob } = await import("@/lib/runs/run-job");
const { logger } = await import("@/lib/log");
const { sleep } = await import("@/lib/time");
const { queue } = await import("@/lib/queues/queues");
const { makeJob, queueJobFor } = await import("@/test/helpers/jobs");
const { deleteTenant, uniqueTenantSlug } = await import("@/test/helpers/tenants");

const operator: Principal = {
  userId: "u-stuck-op",
  username: `stuck-op-${randomBytes(3).toString("hex")}`,
  role: "operator",
  via: "token",
};
const viewer: Principal = { userId: "u-stuck-view", username: "stuck-viewer", role: "viewer", via: "token" };

beforeEach(() => {
  caller.principal = operator;
});
afterAll(async () => {
  await closeQueues();
  await closeRedis();
  await closeDb();
});

const call = (handler: typeof fail.POST, cause: string, body: string | null) =>
  handler(
    new Request(`http://localhost/api/stuck/${cause}/x`, {
      method: "POST",
      body,
      headers: body === null ? {} : { "content-type": "application/json" },
    }),
    {
      params: Promise.resolve({ cause }),
    },
  );

describe("POST /api/stuck/:cause/fail, /retry and /handled", () => {
  it("an empty body or an empty selection is a 400 that says so, and is audited as refused", async () => {
    for (const [handler, cause, body] of [
      [fail.POST, "late_start", null],
      [fail.POST, "late_start", "{}"],
      [fail.POST, "lost_from_queue", '{ "jobIds": [] }'],
      [retry.POST, "awaiting_operator", null],
      [handled.POST, "awaiting_operator", '{ "jobIds": [] }'],
    ] as const) {
      const res = await call(handler, cause, body);
      expect(res.status).toBe(400);
      const json = (await res.json()) as { error: { code: string; message: string } };
      expect(json.error.code).toBe("empty_selection");
      expect(json.error.message).toMatch(/^No job selected: nothing was done\./);
    }
    const audit = await db().auditEntry.findMany({
      where: { actor: operator.username },
      select: { action: true, result: true, target: true },
    });
    expect(audit).toHaveLength(5);
    expect(audit.every((a) => a.result === "refused" && a.action.startsWith("stuck."))).toBe(true);
  });

  it("refuses a viewer (403), an unknown group (404) and ids that are not job ids (422)", async () => {
    caller.principal = viewer;
    expect((await call(fail.POST, "late_start", '{ "jobIds": ["00000000-0000-4000-8000-000000000000"] }')).status).toBe(
      403,
    );
    expect(
      (await call(handled.POST, "awaiting_operator", '{ "jobIds": ["00000000-0000-4000-8000-000000000000"] }')).status,
    ).toBe(403);
    const refused = await db().auditEntry.findFirst({
      where: { actor: viewer.username, action: "stuck.handle" },
      orderBy: { at: "desc" },
    });
    expect(refused?.result).toBe("refused");
    caller.principal = operator;
    expect(
      (await call(handled.POST, "late_start", '{ "jobIds": ["00000000-0000-4000-8000-000000000000"] }')).status,
    ).toBe(409);
    expect((await call(fail.POST, "everything", '{ "jobIds": ["00000000-0000-4000-8000-000000000000"] }')).status).toBe(
      404,
    );
    const bad = await call(fail.POST, "late_start", '{ "jobIds": ["nope"] }');
    expect(bad.status).toBe(422);
  });
});

describe("GET /api/stuck", () => {
  it("gives a viewer what the page shows: every group with its count, jobs awaiting an operator first", async () => {
    caller.principal = viewer;
    const res = await list.GET(new Request("http://localhost/api/stuck?late_start=2"), undefined as never);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { groups: { cause: string; count: number; page: number }[] };
    expect(body.groups.map((g) => g.cause)).toEqual([
      "awaiting_operator",
      "lost_from_queue",
      "over_hard_limit",
      "heartbeat_lost",
      "late_start",
    ]);
    caller.principal = null;
    expect((await list.GET(new Request("http://localhost/api/stuck"), undefined as never)).status).toBe(401);
  });
});

describe("an interactive agent run far too big for its budget", () => {
  it('ends waiting on a person: its customer is not told it continues by itself, bounded_jobs_awaiting_operator{kind="agent_run"} counts it, GET /api/stuck lists it first with its action; an operator\'s retry takes it out', async () => {
    const gauge = createMetrics(new Registry(), { countAwaitingOperator: () => countAwaitingOperatorByKind() });
    const awaiting = async () => {
      const text = await gauge.registry.metrics();
      return Number(/^bounded_jobs_awaiting_operator\{kind="agent_run"\} (\d+)$/m.exec(text)?.[1]);
    };
    const before = await awaiting();
    const slug = uniqueTenantSlug("agent-too-big");
    try {
      // One minute of budget (the agent-interactive queue's), 60 ms here; the run has hours of steps.
      const { id } = await makeJob(slug, {
        kind: "agent_run",
        queue: "agent-interactive",
        total: 400,
        softMs: 60_000,
        hardMs: 90_000,
      });
      await runJob(
        { agent_run: ({ signal }) => sleep(3_600_000, signal) },
        queueJobFor(id, "agent-interactive", "agent_run"),
        new AbortController().signal,
        logger("test"),
      ).catch(() => undefined);
      const { status, progressToken } = await db().job.findUniqueOrThrow({
        where: { id },
        select: { status: true, progressToken: true },
      });
      expect(status).toBe("timed_out");

      const customer = (await getCustomerProgress(progressToken))!;
      expect(`${customer.message} ${customer.next}`).not.toMatch(
        /continues by itself|will be resumed|send anything again/i,
      );
      expect(customer.next).toContain("Our team has been told and will continue it; you don't need to start it again.");

      expect(await awaiting()).toBe(before + 1);
      caller.principal = viewer;
      const res = await list.GET(new Request("http://localhost/api/stuck"), undefined as never);
      const body = (await res.json()) as {
        groups: {
          cause: string;
          ids: string[];
          jobs: { id: string; endCause: string; action: string; why: string; customerWaitMs: number }[];
        }[];
      };
      expect(body.groups[0]!.cause).toBe("awaiting_operator");
      expect(body.groups[0]!.ids).toContain(id);
      expect(body.groups[0]!.jobs.find((j) => j.id === id)).toMatchObject({
        endCause: "too_big_cannot_split",
        action: "retry_larger_budget",
        why: "Too big for its budget (this kind cannot split)",
      });

      caller.principal = operator;
      const retried = await call(retry.POST, "awaiting_operator", JSON.stringify({ jobIds: [id] }));
      expect(retried.status).toBe(202);
      expect(await awaiting()).toBe(before);
      await queue("agent-interactive").remove(id);
    } finally {
      await deleteTenant(slug);
    }
  });
});
