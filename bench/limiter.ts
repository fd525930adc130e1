/**
 * npm run bench:limiter — what rescheduling buys over sleeping in the slot, and what the limiter
 * costs per call.
 *
 * (a) 20 tenants × 10 pages of `statistics` (one request per window), at a time scale where a
 *     window is 1 s: one token per second per tenant. The real stack — BullMQ worker with
 *     concurrency 5, the runtime, PostgreSQL, Redis, the marketplace simulator — runs the syncs
 *     twice: with the reschedule wrapper (a wait gives the slot back), and without it (the job
 *     sleeps in its slot, as before). Makespans against the ideal, pages ÷ rate = 10 s.
 *     Target: reschedule ≤ 1.10 × ideal.
 * (b) `tryAcquire` calls per second on one Redis connection, against a trivial EVALSHA with the
 *     same keys and arguments on the same connection (the ceiling), and against
 *     rate-limiter-flexible's `RateLimiterRedis.consume` (the well-known peer), same connection.
 * (c) the 429s the marketplace simulator answered during (a): the limiter must cause none.
 */
import net from "node:net";
import os from "node:os";
import pg from "pg";

const DATABASE = "bounded_bench_limiter";
const url = `postgresql://postgres@127.0.0.1:5432/${DATABASE}`;
const TENANTS = 20;
const PAGES = 10;
const CONCURRENCY = 5;
// A statistics window is 60 s in production: at 1/60 it is 1 s, one token per second per tenant.
const SCALE = 1 / 60;
const IDEAL_S = PAGES / 1;
const CALLS = 20_000;
const IN_FLIGHT = 64;

const freePort = async () => {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
};

const admin = new pg.Client({ connectionString: "postgresql://postgres@127.0.0.1:5432/postgres" });
await admin.connect();
await admin.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
const simPort = await freePort();
const prefix = `bounded-bench-limiter-${process.pid}`;
// A benchmark's own environment: set before any module reads it.
Object.assign(process.env, {
  DATABASE_URL: url,
  BOUNDED_TIME_SCALE: String(SCALE),
  BOUNDED_REDIS_PREFIX: prefix,
  LOG_LEVEL: "silent",
  MARKETPLACE_BASE_URL: `http://127.0.0.1:${simPort}/marketplace`,
  // Sleeping in the slot spends the budget on waiting: give both variants room, so the
  // comparison is about time, not about which one times out.
  BOUNDED_BUDGET_MARKETPLACE_SYNC_SOFT_S: "60000",
  BOUNDED_BUDGET_MARKETPLACE_SYNC_HARD_S: "90000",
});
const { migrate } = await import("../scripts/db/migrate");
await migrate(url);
const { Worker } = await import("bullmq");
const { Redis } = await import("ioredis");
const { RateLimiterRedis } = await import("rate-limiter-flexible");
const { db, closeDb } = await import("@/lib/db/client");
const { createRedis, closeRedis } = await import("@/lib/redis/client");
const { queue, closeQueues } = await import("@/lib/queues/queues");
const { logger } = await import("@/lib/log");
const { startSync } = await import("@/lib/syncs/create-sync");
const { createLimiter, bucketKey } = await import("@/lib/ratelimit/limiter");
const { startSimulators } = await import("@/workers/simulators/server");
const { PROCESSORS } = await import("@/workers/catalog");
const { queueProcessor } = await import("@/workers/queue-processor");
const { runJob } = await import("@/workers/runtime");
const { rescheduleWorkerOptions } = await import("@/workers/reschedule");

const sim = await startSimulators({ port: simPort, marketplace: { pages: PAGES, timeScale: SCALE }, model: { errorRate: 0, timeScale: SCALE } });
const log = logger("bench");
const shutdown = new AbortController();

type Variant = "reschedule" | "sleep";

async function makespan(variant: Variant): Promise<{ seconds: number; reschedules: number; slotSecondsPerJob: number }> {
  await queue("marketplace-sync").obliterate({ force: true });
  const connection = createRedis("worker");
  const processor =
    variant === "reschedule"
      ? queueProcessor("marketplace-sync", { processors: PROCESSORS, shutdown: shutdown.signal, log })
      : async (job: Parameters<ReturnType<typeof queueProcessor>>[0]) => runJob(PROCESSORS, job, shutdown.signal, log);
  const worker = new Worker("marketplace-sync", processor, { connection, prefix, concurrency: CONCURRENCY, ...rescheduleWorkerOptions("marketplace-sync") });
  worker.on("error", () => undefined);
  await worker.waitUntilReady();
  const started = Date.now();
  const ids = [];
  for (let t = 1; t <= TENANTS; t++) ids.push((await startSync({ tenant: `${variant}-t${String(t).padStart(2, "0")}`, family: "statistics" })).jobId);
  for (;;) {
    const open = await db().job.count({ where: { id: { in: ids }, status: { in: ["queued", "running", "delayed"] } } });
    if (open === 0) break;
    // The makespan is read off the rows (finishedAt); polling slowly keeps the database for the workers.
    await new Promise((r) => setTimeout(r, 250));
  }
  const rows = await db().job.findMany({ where: { id: { in: ids } }, select: { status: true, processed: true, finishedAt: true, reschedules: true, slotMsUsed: true, attemptStartedAt: true } });
  const bad = rows.filter((r) => r.status !== "completed" || r.processed !== PAGES);
  if (bad.length) throw new Error(`${variant}: ${bad.length} syncs did not complete all pages (${bad.map((b) => b.status).join(", ")})`);
  const last = Math.max(...rows.map((r) => r.finishedAt!.getTime()));
  await worker.close();
  await connection.quit();
  // Slot time in real seconds: what rescheduled runs kept on the row plus their last run.
  const slot = rows.map((r) => r.slotMsUsed * SCALE + (r.finishedAt!.getTime() - r.attemptStartedAt!.getTime()));
  return {
    seconds: (last - started) / 1000,
    reschedules: rows.reduce((n, r) => n + r.reschedules, 0),
    slotSecondsPerJob: slot.reduce((a, b) => a + b, 0) / slot.length / 1000,
  };
}

const resched = await makespan("reschedule");
const sleeping = await makespan("sleep");
const violations = sim.marketplace.violations().total;

// (b) calls per second, one connection each, IN_FLIGHT calls outstanding.
async function rate(fn: (i: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 1_000; i++) await fn(i); // warm-up: scripts loaded, connection hot
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < CALLS) await fn(next++);
    }),
  );
  return CALLS / ((performance.now() - t0) / 1000);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rates: Record<"tryAcquire" | "evalsha" | "flexible", number[]> = { tryAcquire: [], evalsha: [], flexible: [] };
for (let round = 0; round < 3; round++) {
  const c1 = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  const limiter = createLimiter({ redis: c1, timeScale: 1 });
  rates.tryAcquire.push(await rate((i) => limiter.tryAcquire(`orders:bench-${i % 1000}`)));
  await c1.quit();

  const c2 = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  const sha = (await c2.script("LOAD", "return {1, 0, ''}")) as string;
  // The same key and argument count as the token bucket: capacity, refill per ms, cost, TTL.
  rates.evalsha.push(await rate((i) => c2.evalsha(sha, 1, bucketKey(`orders:bench-${i % 1000}`), 10, 0.000167, 1, 61_000)));
  await c2.quit();

  const c3 = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  const flexible = new RateLimiterRedis({ storeClient: c3, points: 10, duration: 60, keyPrefix: `${prefix}:flexible` });
  rates.flexible.push(await rate((i) => flexible.consume(`bench-${i % 1000}`).catch(() => undefined)));
  await c3.quit();
}
const tryAcquireRate = median(rates.tryAcquire);
const evalshaRate = median(rates.evalsha);
const flexibleRate = median(rates.flexible);

// Clean up: the bench's keys, database and servers.
const cleanup = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
for (;;) {
  const keys = await cleanup.keys(`${prefix}:*`);
  if (keys.length === 0) break;
  await cleanup.del(...keys.slice(0, 1000));
}
await cleanup.quit();
await closeQueues();
await closeRedis();
await closeDb();
await sim.close();
await admin.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
await admin.end();

const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);
const ratio = resched.seconds / IDEAL_S;
console.log(`(a) ${TENANTS} tenants × ${PAGES} pages, 1 token/s per tenant, concurrency ${CONCURRENCY}; ideal (pages ÷ rate) ${f1(IDEAL_S)} s`);
console.log(`    reschedule: ${f1(resched.seconds)} s (${f2(ratio)} × ideal, ${resched.reschedules} reschedules, ${f2(resched.slotSecondsPerJob)} s in a slot per job)`);
console.log(`    sleep in the slot: ${f1(sleeping.seconds)} s (${f2(sleeping.seconds / IDEAL_S)} × ideal, ${f2(sleeping.slotSecondsPerJob)} s in a slot per job)`);
console.log(`(b) calls/s on one connection, ${IN_FLIGHT} in flight, median of 3 × ${CALLS}: tryAcquire ${Math.round(tryAcquireRate)}, trivial EVALSHA ${Math.round(evalshaRate)}, rate-limiter-flexible consume ${Math.round(flexibleRate)}`);
console.log(`(c) marketplace 429s during (a): ${violations}`);
// Each reschedule costs a few database round trips in a slot; on a busy machine they dominate.
console.log(`machine: ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(1)).join(" / ")} (1 / 5 / 15 min)`);
console.log(
  `RESULT bench=limiter tenants=${TENANTS} pages=${PAGES} concurrency=${CONCURRENCY} ideal_s=${f1(IDEAL_S)} reschedule_s=${f1(resched.seconds)} sleep_s=${f1(sleeping.seconds)} ratio_reschedule_to_ideal=${f2(ratio)} ratio_sleep_to_ideal=${f2(sleeping.seconds / IDEAL_S)} target_ratio=1.10 ok=${ratio <= 1.1} tryacquire_per_s=${Math.round(tryAcquireRate)} evalsha_per_s=${Math.round(evalshaRate)} flexible_per_s=${Math.round(flexibleRate)} ratio_tryacquire_to_evalsha=${f2(tryAcquireRate / evalshaRate)} ratio_tryacquire_to_flexible=${f2(tryAcquireRate / flexibleRate)} violations_429=${violations} load1=${os.loadavg()[0]!.toFixed(1)}`,
);
process.exit(0);
