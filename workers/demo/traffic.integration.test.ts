import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, it, vi } from "vitest";

// The demo's first burst against the real database and queues (a prefix of its own, so no
// worker of another test picks its jobs up): every kind of work the dashboard shows is started.
const prefix = `bounded-test-demo-${randomUUID().slice(0, 8)}`;
let traffic: typeof import("./traffic");
let m: {
  db: typeof import("@/lib/db/client");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  log: typeof import("@/lib/log");
};

beforeAll(async () => {
  vi.stubEnv("BOUNDED_REDIS_PREFIX", prefix);
  traffic = await import("./traffic");
  m = {
    db: await import("@/lib/db/client"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    log: await import("@/lib/log"),
  };
});
afterAll(async () => {
  const keys = await m.redis.redis().keys(`${prefix}:*`);
  if (keys.length) await m.redis.redis().del(...keys);
  await m.queues.closeQueues();
  await m.redis.closeRedis();
  await m.db.closeDb();
});

it("starts one of each kind of work, a sync per family for five tenants, and tops up the packs it generates against", async () => {
  const since = new Date();
  const stopped = new AbortController();
  stopped.abort();
  let seed = 1;
  const random = () => {
    seed = (seed * 16807) % 2147483647;
    return (seed - 1) / 2147483646;
  };
  await traffic.runDemoTraffic({ log: m.log.logger("test"), signal: stopped.signal, random });

  const jobs = await m.db.db().job.groupBy({
    by: ["kind"],
    where: { createdAt: { gte: since }, tenant: { slug: { in: traffic.DEMO_TENANTS } } },
    _count: { _all: true },
  });
  const kinds = Object.fromEntries(jobs.map((j) => [j.kind, j._count._all]));
  expect(Object.keys(kinds).sort()).toEqual([
    "agent_run",
    "bulk_ocr",
    "card_generation",
    "csv_import",
    "marketplace_sync",
  ]);
  expect(kinds.marketplace_sync).toBeGreaterThanOrEqual(5);
  const packs = await m.db
    .db()
    .quotaPack.count({ where: { remaining: { gt: 0 }, tenant: { slug: { in: traffic.DEMO_TENANTS } } } });
  expect(packs).toBeGreaterThanOrEqual(1);
});

it("picks work by weight", () => {
  const counts = new Map<string, number>();
  let seed = 7;
  const random = () => {
    seed = (seed * 16807) % 2147483647;
    return (seed - 1) / 2147483646;
  };
  for (let i = 0; i < 16_000; i++) {
    const a = traffic.nextAction(random);
    counts.set(a.name, (counts.get(a.name) ?? 0) + 1);
  }
  const total = traffic.DEMO_ACTIONS.reduce((s, a) => s + a.weight, 0);
  for (const a of traffic.DEMO_ACTIONS) expect(counts.get(a.name)! / 16_000).toBeCloseTo(a.weight / total, 1);
});
