/**
 * `npm run bench:limiter` (`npx tsx bench/limiter.ts`): what rescheduling buys over sleeping in
 * the slot, and what the limiter costs per call.
 *
 * (a) 20 tenants × 10 pages of `statistics` (one request per window, a bucket of one that starts
 *     full), at a time scale where a window is 1 s: one token per second per tenant. The real
 *     stack — a BullMQ worker with concurrency 5 running `queueProcessor` with the catalog's
 *     processors, PostgreSQL, Redis, the marketplace simulator — runs the syncs twice: as the
 *     product runs them (a wait past the deferral threshold gives the slot back), and with the
 *     deferral threshold raised past any wait (the job sleeps in its slot) as the baseline.
 *     Makespans (first sync started → last row finished) against the ideal from the run's
 *     parameters: every tenant's first page at once (the bucket is full), then one a window, and
 *     the pages' latency shared by the worker slots —
 *     `max((pages − capacity) × window + page latency, tenants × pages × page latency ÷ slots)`.
 *     Target: reschedule ≤ 1.10 × ideal.
 * (b) `tryAcquire` calls per second on one Redis connection, against a trivial EVALSHA with the
 *     same keys and arguments on the same connection (the ceiling), and against
 *     rate-limiter-flexible's `RateLimiterRedis.consume` (the well-known peer), same connection.
 * (c) the 429s the marketplace simulator answered during (a): the limiter must cause none.
 *
 * Each variant gets a cap (3 × the sleeping floor); one that does not end within it is reported
 * with its rows' statuses and the bench ends with exit code 1. Runs in a database of its own
 * beside `DATABASE_URL`'s (`bounded_bench_limiter`, created with the project's migrations, dropped
 * at the end) and a Redis prefix of its own (removed at the end). Ends with one line:
 * `RESULT bench=limiter ideal_s=… reschedule_s=… sleep_s=… ratio_reschedule_to_ideal=… ratio_sleep_to_reschedule=… …`.
 */
import net from "node:net";
import os from "node:os";
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import { BenchTimeout, benchDatabaseUrl, benchRedisPrefix, withinCap } from "./common";
import { dropDatabase, migrate } from "../scripts/db/migrate";

const TENANTS = 20;
const PAGES = 10;
const CONCURRENCY = 5;
// A statistics window is 60 s in production: at 1/60 it is 1 s, one token per second per tenant.
const SCALE = 1 / 60;
/** One page's production latency (the simulator's default is 40–200 ms uniform; its mean, fixed so the ideal is exact). */
const PAGE_LATENCY_MS = 120;
/** A deferral threshold no wait here reaches (real ms): the baseline's jobs sleep every wait in their slot. */
const SLEEP_THRESHOLD_MS = 24 * 3600 * 1000;
const GOAL_RATIO = 1.1;
const CALLS = 20_000;
const IN_FLIGHT = 64;

const benchUrl = benchDatabaseUrl("bounded_bench_limiter");
const prefix = benchRedisPrefix("limiter");

const freePort = async () => {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
};

type Variant = "reschedule" | "sleep";

async function main(): Promise<void> {
  await dropDatabase(benchUrl);
  await migrate(benchUrl);
  const simPort = await freePort();
  // A benchmark's own environment: set before any module reads it.
  Object.assign(process.env, {
    DATABASE_URL: benchUrl,
    BOUNDED_TIME_SCALE: String(SCALE),
    BOUNDED_REDIS_PREFIX: prefix,
    LOG_LEVEL: "silent",
    MARKETPLACE_BASE_URL: `http://127.0.0.1:${simPort}/marketplace`,
    // Sleeping in the slot spends the budget on waiting: give both variants room, so the
    // comparison is about time, not about which one times out.
    BOUNDED_BUDGET_MARKETPLACE_SYNC_SOFT_S: "60000",
    BOUNDED_BUDGET_MARKETPLACE_SYNC_HARD_S: "90000",
  });
  const { Worker } = await import("bullmq");
  const { Redis } = await import("ioredis");
  const { RateLimiterRedis } = await import("rate-limiter-flexible");
  const { env } = await import("../lib/env");
  const { db, closeDb } = await import("../lib/db/client");
  const { createRedis, closeRedis, scanKeys, PRODUCER_COMMAND_TIMEOUT_MS } = await import("../lib/redis/client");
  const { queue, closeQueues } = await import("../lib/queues/queues");
  const { logger } = await import("../lib/log");
  const { scaled } = await import("../lib/time");
  const { startSync } = await import("../lib/syncs/create-sync");
  const { BUCKETS } = await import("../lib/ratelimit/buckets");
  const { runWithRateLimitDeferral } = await import("../lib/ratelimit/context");
  const { createLimiter, bucketKey, deferThresholdMs } = await import("../lib/ratelimit/limiter");
  const { OPEN_STATUSES } = await import("../lib/core/job-statuses");
  const { startSimulators } = await import("../workers/simulators/server");
  const { PROCESSORS } = await import("../workers/catalog");
  const { queueProcessor } = await import("../workers/queue-processor");
  const { rescheduleWorkerOptions } = await import("../lib/runs/reschedule");
  type Processor = import("../lib/runs/processor").Processor;

  const sim = await startSimulators({
    port: simPort,
    marketplace: { pages: PAGES, timeScale: SCALE, latencyMs: () => PAGE_LATENCY_MS },
    model: { errorRate: 0, timeScale: SCALE },
  });
  const log = logger("bench");
  const shutdown = new AbortController();
  const f1 = (n: number) => n.toFixed(1);
  const f2 = (n: number) => n.toFixed(2);
  const f3 = (n: number) => n.toFixed(3);

  // ── The ideal, from the run's parameters (real seconds) ──────────────────────────────────────
  const spec = BUCKETS.statistics;
  const windowS = scaled(spec.windowMs, SCALE) / spec.refillPerWindow / 1000;
  const pageS = scaled(PAGE_LATENCY_MS, SCALE) / 1000;
  const byWindows = (PAGES - spec.capacity) * windowS + pageS;
  const bySlots = (TENANTS * PAGES * pageS) / CONCURRENCY;
  const idealS = Math.max(byWindows, bySlots);
  const idealArithmetic =
    `ideal = max((pages − capacity) × window + page latency, tenants × pages × page latency ÷ slots) = ` +
    `max((${PAGES} − ${spec.capacity}) × ${f3(windowS)} s + ${f3(pageS)} s = ${f2(byWindows)} s, ${TENANTS} × ${PAGES} × ${f3(pageS)} s ÷ ${CONCURRENCY} = ${f2(bySlots)} s) = ${f2(idealS)} s`;
  /** Sleeping holds a slot for a tenant's whole sync: the slots take the tenants in waves. */
  const sleepFloorS = Math.ceil(TENANTS / CONCURRENCY) * byWindows;
  const capS = 3 * Math.max(idealS, sleepFloorS);

  /** The catalog's processors with the deferral threshold raised past any wait: every wait is slept in the slot. */
  const sleeping: Record<string, Processor> = Object.fromEntries(
    Object.entries(PROCESSORS).map(([kind, processor]) => [
      kind,
      (ctx: Parameters<Processor>[0]) => runWithRateLimitDeferral(SLEEP_THRESHOLD_MS, () => processor(ctx)),
    ]),
  );

  const isOpen = (status: string) => (OPEN_STATUSES as readonly string[]).includes(status);

  /** Every row terminal, polled slowly to keep the database for the workers (the makespan is read off the rows). */
  const untilTerminal = async (ids: string[]) => {
    for (;;) {
      const open = await db().job.count({ where: { id: { in: ids }, status: { in: [...OPEN_STATUSES] } } });
      if (open === 0) return;
      await new Promise((r) => setTimeout(r, 250));
    }
  };

  async function makespan(
    variant: Variant,
  ): Promise<{ seconds: number; reschedules: number; slotSecondsPerJob: number }> {
    await queue("marketplace-sync").obliterate({ force: true });
    const connection = createRedis("worker");
    const processors = variant === "reschedule" ? PROCESSORS : sleeping;
    const worker = new Worker(
      "marketplace-sync",
      queueProcessor("marketplace-sync", { processors, shutdown: shutdown.signal, log }),
      {
        connection,
        prefix,
        concurrency: CONCURRENCY,
        ...rescheduleWorkerOptions("marketplace-sync"),
      },
    );
    worker.on("error", () => undefined);
    await worker.waitUntilReady();
    const started = Date.now();
    const ids: string[] = [];
    try {
      for (let t = 1; t <= TENANTS; t++)
        ids.push(
          (await startSync({ tenant: `${variant}-t${String(t).padStart(2, "0")}`, family: "statistics" })).jobId,
        );
      await withinCap(untilTerminal(ids), capS * 1000, `${variant}: ${TENANTS} syncs`);
    } catch (err) {
      if (err instanceof BenchTimeout) {
        const open = await db().job.findMany({ where: { id: { in: ids } }, select: { status: true, message: true } });
        const byStatus = Object.entries(
          open.reduce<Record<string, number>>((o, r) => {
            o[r.status] = (o[r.status] ?? 0) + 1;
            return o;
          }, {}),
        );
        const example = open.find((r) => isOpen(r.status));
        err.message += `: ${byStatus.map(([s, n]) => `${n} ${s}`).join(", ")}${example ? ` (e.g. ${example.status}: ${example.message ?? "no message"})` : ""}`;
      }
      throw err;
    } finally {
      await worker.close(true);
      await connection.quit();
    }
    const rows = await db().job.findMany({
      where: { id: { in: ids } },
      select: {
        status: true,
        processed: true,
        finishedAt: true,
        reschedules: true,
        slotMsUsed: true,
        attemptStartedAt: true,
      },
    });
    const bad = rows.filter((r) => r.status !== "completed" || r.processed !== PAGES);
    if (bad.length)
      throw new Error(
        `${variant}: ${bad.length} syncs did not complete all pages (${bad.map((b) => b.status).join(", ")})`,
      );
    const last = Math.max(...rows.map((r) => r.finishedAt!.getTime()));
    // Slot time in real seconds: what rescheduled runs kept on the row plus their last run.
    const slot = rows.map((r) => r.slotMsUsed * SCALE + (r.finishedAt!.getTime() - r.attemptStartedAt!.getTime()));
    return {
      seconds: (last - started) / 1000,
      reschedules: rows.reduce((n, r) => n + r.reschedules, 0),
      slotSecondsPerJob: slot.reduce((a, b) => a + b, 0) / slot.length / 1000,
    };
  }

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

  let outcome: "ok" | "broke" = "broke";
  try {
    const resched = await makespan("reschedule");
    const slept = await makespan("sleep");
    const violations = sim.marketplace.violations().total;

    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const rates: Record<"tryAcquire" | "evalsha" | "flexible", number[]> = {
      tryAcquire: [],
      evalsha: [],
      flexible: [],
    };
    const redisUrl = env().REDIS_URL;
    // Connections as the process's shared one is made (lib/redis/client.ts): ioredis gives up on a
    // command after its own timeout, which the limiter then relies on instead of a timer of its own.
    const connection = { commandTimeout: PRODUCER_COMMAND_TIMEOUT_MS };
    for (let round = 0; round < 3; round++) {
      const c1 = new Redis(redisUrl, connection);
      const limiter = createLimiter({ redis: c1, timeScale: 1 });
      rates.tryAcquire.push(await rate((i) => limiter.tryAcquire(`orders:bench-${i % 1000}`)));
      await c1.quit();

      const c2 = new Redis(redisUrl, connection);
      const sha = (await c2.script("LOAD", "return {1, 0, ''}")) as string;
      // The same key and argument count as the token bucket: capacity, refill per ms, cost, TTL.
      rates.evalsha.push(
        await rate((i) => c2.evalsha(sha, 1, bucketKey(`orders:bench-${i % 1000}`), 10, 0.000167, 1, 61_000)),
      );
      await c2.quit();

      const c3 = new Redis(redisUrl, connection);
      const flexible = new RateLimiterRedis({
        storeClient: c3,
        points: 10,
        duration: 60,
        keyPrefix: `${prefix}:flexible`,
      });
      rates.flexible.push(await rate((i) => flexible.consume(`bench-${i % 1000}`).catch(() => undefined)));
      await c3.quit();
    }
    const tryAcquireRate = median(rates.tryAcquire);
    const evalshaRate = median(rates.evalsha);
    const flexibleRate = median(rates.flexible);

    const ratio = resched.seconds / idealS;
    const load = os.loadavg();
    console.log(
      `(a) ${TENANTS} tenants × ${PAGES} pages of statistics (a bucket of ${spec.capacity}, one token a window of ${f3(windowS)} s real), ${CONCURRENCY} worker slots, page latency ${f3(pageS)} s real; ` +
        `deferral threshold ${deferThresholdMs()} ms real (the baseline's: past any wait)`,
    );
    console.log(`    ${idealArithmetic}`);
    console.log(
      `    reschedule: ${f1(resched.seconds)} s = ${f2(ratio)} × ideal (goal ≤ ${GOAL_RATIO}), ${resched.reschedules} reschedules, ${f2(resched.slotSecondsPerJob)} s in a slot per job`,
    );
    console.log(
      `    sleep in the slot (baseline): ${f1(slept.seconds)} s = ${f2(slept.seconds / idealS)} × ideal, ${f2(slept.slotSecondsPerJob)} s in a slot per job ` +
        `(a slot holds a tenant for its whole sync: ⌈${TENANTS} ÷ ${CONCURRENCY}⌉ × ${f2(byWindows)} s = ${f1(sleepFloorS)} s at best); sleep ÷ reschedule = ${f2(slept.seconds / resched.seconds)}`,
    );
    console.log(`    ${ratio <= GOAL_RATIO ? "PASS" : "MISS"} reschedule ${f2(ratio)} × ideal (goal ≤ ${GOAL_RATIO})`);
    console.log(
      `(b) calls/s on one connection, ${IN_FLIGHT} in flight, median of 3 × ${CALLS}: tryAcquire ${Math.round(tryAcquireRate)}, trivial EVALSHA ${Math.round(evalshaRate)}, rate-limiter-flexible consume ${Math.round(flexibleRate)}`,
    );
    console.log(`(c) marketplace 429s during (a): ${violations}`);
    // Each reschedule costs a few database round trips in a slot; on a busy machine they dominate.
    console.log(
      `machine: ${os.cpus().length} cores, load average ${load.map((l) => f1(l)).join(" / ")} (1 / 5 / 15 min)`,
    );
    console.log(
      `RESULT bench=limiter tenants=${TENANTS} pages=${PAGES} concurrency=${CONCURRENCY} ideal_s=${f2(idealS)} reschedule_s=${f1(resched.seconds)} sleep_s=${f1(slept.seconds)} ` +
        `ratio_reschedule_to_ideal=${f2(ratio)} ratio_sleep_to_ideal=${f2(slept.seconds / idealS)} ratio_sleep_to_reschedule=${f2(slept.seconds / resched.seconds)} target_ratio=${GOAL_RATIO} ok=${ratio <= GOAL_RATIO} ` +
        `tryacquire_per_s=${Math.round(tryAcquireRate)} evalsha_per_s=${Math.round(evalshaRate)} flexible_per_s=${Math.round(flexibleRate)} ratio_tryacquire_to_evalsha=${f2(tryAcquireRate / evalshaRate)} ` +
        `ratio_tryacquire_to_flexible=${f2(tryAcquireRate / flexibleRate)} violations_429=${violations} load1=${f1(load[0]!)}`,
    );
    outcome = "ok";
  } catch (err) {
    console.error(`FAIL bench=limiter: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    // Clean up: the bench's keys, database and servers.
    shutdown.abort();
    await closeQueues();
    const cleanup = createRedis("producer", { enableOfflineQueue: true });
    for await (const keys of scanKeys(cleanup, `${prefix}:*`, 1_000)) if (keys.length) await cleanup.del(...keys);
    await cleanup.quit();
    await closeRedis();
    await closeDb();
    await sim.close();
    await dropDatabase(benchUrl);
  }
  process.exit(outcome === "ok" ? 0 : 1);
}

main().catch(async (err: unknown) => {
  console.error(err);
  await dropDatabase(benchUrl).catch(() => undefined);
  process.exit(1);
});
