import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { proxyDependencies, type CuttableProxy } from "@/test/helpers/cuttable-proxy";

// Route handlers of the web process (NEXT_RUNTIME set, so its short timeouts apply) against a
// PostgreSQL and a Redis reached through proxies the test cuts: a stopped server (connections
// closed, new ones refused) and, for Redis, one that accepts and never answers. The shared
// servers are never touched.
let pgProxy: CuttableProxy;
let redisProxy: CuttableProxy;
let api: typeof import("@/lib/http/api");
let dbClient: typeof import("@/lib/db/client");
let redisClient: typeof import("@/lib/redis/client");
let health: typeof import("@/lib/reports/health");

beforeAll(async () => {
  ({ pgProxy, redisProxy } = await proxyDependencies());
  vi.stubEnv("NEXT_RUNTIME", "nodejs");
  api = await import("@/lib/http/api");
  dbClient = await import("@/lib/db/client");
  redisClient = await import("@/lib/redis/client");
  health = await import("@/lib/reports/health");
});
afterAll(async () => {
  await redisClient.closeRedis();
  await dbClient.closeDb();
  await pgProxy.close();
  await redisProxy.close();
});

const readsDatabase = () =>
  api.route(
    "public",
    async () => Response.json({ jobs: await dbClient.db().job.count() }),
    "test-db",
  )(new Request("http://t/db"), {});
const readsRedis = () =>
  api.route(
    "public",
    async () => Response.json({ value: await redisClient.redis().get(redisClient.key("outage-test")) }),
    "test-redis",
  )(new Request("http://t/redis"), {});

async function expectUnavailable(res: Response, message: string) {
  expect(res.status).toBe(503);
  expect(res.headers.get("retry-after")).toBe("30");
  expect(await res.json()).toEqual({ error: { code: "unavailable", message } });
}

describe("the web during an outage", () => {
  it("PostgreSQL stopped: a route answers 503 with the JSON message and Retry-After, and 200 again once it is back", async () => {
    expect((await readsDatabase()).status).toBe(200);
    await pgProxy.down();
    try {
      await expectUnavailable(await readsDatabase(), "The database is not reachable right now; try again in a minute.");
      // A fresh connection is refused too (the pool's connection was the first to go).
      await expectUnavailable(await readsDatabase(), "The database is not reachable right now; try again in a minute.");
      expect(await health.checkHealth()).toMatchObject({ ok: false, db: "down" });
    } finally {
      await pgProxy.up();
    }
    expect((await readsDatabase()).status).toBe(200);
  });

  it("Redis stopped, then not answering: a route answers 503 each time instead of waiting for it", async () => {
    expect((await readsRedis()).status).toBe(200);
    await redisProxy.down();
    await expectUnavailable(
      await readsRedis(),
      "The queue service (Redis) is not reachable right now; try again in a minute.",
    );
    await redisProxy.up();
    await vi.waitFor(async () => expect((await readsRedis()).status).toBe(200), { timeout: 10_000, interval: 100 });
    redisProxy.hang();
    try {
      await expectUnavailable(
        await readsRedis(),
        "The queue service (Redis) is not reachable right now; try again in a minute.",
      );
    } finally {
      await redisProxy.up();
    }
  });
});

describe("a customer's progress page while Redis hangs", () => {
  it("still answers from the row, without the live reason why the job waits, instead of waiting for Redis", async () => {
    const { makeJob } = await import("@/test/helpers/jobs");
    const { getCustomerProgress } = await import("@/lib/progress/customer-progress");
    const tenants = await import("@/test/helpers/tenants");
    const slug = tenants.uniqueTenantSlug("outage-progress");
    const { id } = await makeJob(slug, { total: 10, softMs: 600_000, hardMs: 900_000 });
    const { progressToken } = await dbClient
      .db()
      .job.findUniqueOrThrow({ where: { id }, select: { progressToken: true } });
    try {
      expect((await getCustomerProgress(progressToken))!.status).toBe("queued");
      redisProxy.hang();
      try {
        const progress = (await getCustomerProgress(progressToken))!;
        expect(progress).toMatchObject({ status: "queued", message: "In line: it starts shortly." });
        expect(progress.waiting).toBeUndefined();
      } finally {
        await redisProxy.up();
      }
    } finally {
      await tenants.deleteTenant(slug);
    }
  });
});

describe("unavailableDependency", () => {
  it("tells PostgreSQL's and Redis's outages from every other error", async () => {
    const { unavailableDependency, DependencyUnavailable } = await import("./unavailable");
    const named = (name: string, message: string, extra: object = {}) =>
      Object.assign(new Error(message), { name }, extra);
    expect(unavailableDependency(new DependencyUnavailable("redis"))).toBe("redis");
    expect(
      unavailableDependency(named("PrismaClientKnownRequestError", "Can't reach database server", { code: "P1001" })),
    ).toBe("database");
    expect(
      unavailableDependency(
        named("PrismaClientKnownRequestError", "Timed out fetching a new connection from the pool", { code: "P2024" }),
      ),
    ).toBe("database");
    // A transaction that could not get a connection in time (seen as a 500 in a chaos run under load)…
    expect(
      unavailableDependency(
        named(
          "PrismaClientKnownRequestError",
          "Transaction API error: Unable to start a transaction in the given time.",
          { code: "P2028" },
        ),
      ),
    ).toBe("database");
    // …but not the transaction API's other errors (a transaction that outlived its own timeout).
    expect(
      unavailableDependency(
        named(
          "PrismaClientKnownRequestError",
          "Transaction API error: Transaction already closed: A query cannot be executed on an expired transaction.",
          { code: "P2028" },
        ),
      ),
    ).toBeNull();
    // A statement of an interactive transaction whose connection is cut: the adapter's error, unwrapped.
    expect(
      unavailableDependency(named("DriverAdapterError", "ConnectionClosed", { cause: { kind: "ConnectionClosed" } })),
    ).toBe("database");
    expect(unavailableDependency(new Error("Connection terminated unexpectedly"))).toBe("database");
    expect(unavailableDependency(new Error("timeout exceeded when trying to connect"))).toBe("database");
    expect(
      unavailableDependency(
        named("error", "terminating connection due to administrator command", { code: "57P01", severity: "FATAL" }),
      ),
    ).toBe("database");
    expect(unavailableDependency(named("MaxRetriesPerRequestError", "Reached the max retries per request limit"))).toBe(
      "redis",
    );
    expect(unavailableDependency(new Error("Command timed out"))).toBe("redis");
    expect(
      unavailableDependency(named("Error", "connect ECONNREFUSED", { code: "ECONNREFUSED", port: redisProxy.port })),
    ).toBe("redis");
    // Not theirs: an outside service refusing, a constraint, a bad query, a deadline.
    expect(
      unavailableDependency(
        new TypeError("fetch failed", {
          cause: named("Error", "connect ECONNREFUSED", { code: "ECONNREFUSED", port: 4111 }),
        }),
      ),
    ).toBeNull();
    expect(
      unavailableDependency(named("Error", "connect ECONNREFUSED", { code: "ECONNREFUSED", port: 4111 })),
    ).toBeNull();
    expect(
      unavailableDependency(named("PrismaClientKnownRequestError", "Unique constraint failed", { code: "P2002" })),
    ).toBeNull();
    expect(
      unavailableDependency(
        named("DriverAdapterError", "UniqueConstraintViolation", {
          cause: { kind: "UniqueConstraintViolation", originalCode: "23505" },
        }),
      ),
    ).toBeNull();
    expect(unavailableDependency(named("error", "syntax error", { code: "42601", severity: "ERROR" }))).toBeNull();
    expect(unavailableDependency(named("DeadlineExceeded", "soft limit reached"))).toBeNull();
  });
});
