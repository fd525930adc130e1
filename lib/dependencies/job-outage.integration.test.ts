import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { proxyDependencies, TEST_DATABASE_URL, type CuttableProxy } from "@/test/helpers/cuttable-proxy";
import { startImportHarness } from "@/test/helpers/import-harness";
import { waitFor } from "@/test/helpers/wait";

// A real import, run by the runtime as a worker runs it, whose PostgreSQL (or Redis) goes away
// mid-run: every connection of the run goes through a proxy the test cuts, as a stopped server
// would (open connections closed, new ones refused). The checks read the real database directly.
let pgProxy: CuttableProxy;
let redisProxy: CuttableProxy;
let h: Awaited<ReturnType<typeof startImportHarness>>;
const direct = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });

beforeAll(async () => {
  ({ pgProxy, redisProxy } = await proxyDependencies());
  h = await startImportHarness();
});
afterAll(async () => {
  await pgProxy.up();
  await redisProxy.up();
  await h.close();
  await direct.end();
  await pgProxy.close();
  await redisProxy.close();
});

async function jobRow(jobId: string) {
  const { rows } = await direct.query<{
    status: string;
    processed: number;
    failed: number;
    cursor: number;
    total: number | null;
  }>(`SELECT status::text AS status, processed, failed, cursor, total FROM "Job" WHERE id = $1`, [jobId]);
  return rows[0]!;
}

async function expectEveryRowOnce(jobId: string, rows: number) {
  const { rows: counts } = await direct.query<{ written: number; distinct_rows: number; items: number }>(
    `SELECT (SELECT count(*)::int FROM "Transaction" WHERE "jobId" = $1) AS written,
            (SELECT count(DISTINCT row)::int FROM "Transaction" WHERE "jobId" = $1) AS distinct_rows,
            (SELECT count(*)::int FROM "JobItem" WHERE "jobId" = $1) AS items`,
    [jobId],
  );
  expect(counts[0]).toEqual({ written: rows, distinct_rows: rows, items: rows });
  expect(await jobRow(jobId)).toMatchObject({
    status: "completed",
    processed: rows,
    failed: 0,
    cursor: rows,
    total: rows,
  });
}

/** Runs the import and cuts `proxy` for `downMs` once some rows are committed; says what the row was at the cut. */
async function runWithOutage(jobId: string, proxy: CuttableProxy, downMs: number) {
  let settled = false;
  const running = h.run(jobId).finally(() => (settled = true));
  await waitFor(async () => (await jobRow(jobId)).processed > 0 || settled, {
    timeoutMs: 20_000,
    what: "the first rows to be committed",
  });
  if (settled)
    throw new Error(`the run ended before the cut: ${String(await running)} ${JSON.stringify(await jobRow(jobId))}`);
  await proxy.down();
  const atCut = await jobRow(jobId);
  await new Promise((r) => setTimeout(r, downMs));
  const duringOutage = await jobRow(jobId);
  await proxy.up();
  const outcome = await running;
  return { atCut, duringOutage, outcome };
}

describe("forEachItem during a dependency outage", () => {
  /** A loop of `total` items whose effect is a timeline row per item, and whose handler asks Redis. */
  async function outageLoop(total: number, proxy: CuttableProxy) {
    const { makeJob } = await import("@/test/helpers/jobs");
    const { startAttempt } = await import("@/lib/runs/attempt");
    const { forEachItem } = await import("@/lib/runs/for-each-item");
    const { redis, key } = await import("@/lib/redis/client");
    const { logger } = await import("@/lib/log");
    const slug = h.m.tenants.uniqueTenantSlug("outage-loop");
    const { id } = await makeJob(slug, { total, softMs: 600_000, hardMs: 900_000 });
    const run = (await startAttempt(id))!;
    const handled = new Set<number>();
    const loop = forEachItem(
      {
        jobId: id,
        attempt: run.attempt,
        cursor: 0,
        concurrency: 8,
        signal: new AbortController().signal,
        log: logger("test"),
      },
      Array.from({ length: total }, (_, i) => i + 1),
      async (n) => {
        handled.add(n);
        await redis().incr(key("outage-test", id));
        await new Promise((r) => setTimeout(r, 2));
        return (tx) =>
          tx.jobEvent.create({ data: { jobId: id, type: "outage-test", attempt: run.attempt, message: String(n) } });
      },
    );
    await waitFor(async () => (await jobRow(id)).processed >= total / 4, {
      timeoutMs: 20_000,
      what: "a quarter of the items to be committed",
    });
    await proxy.down();
    const handledAtCut = handled.size;
    // A commit whose answer was already on its way when the connection was cut may still land: the
    // row is read once those have (a pause that proves nothing by itself), then again 2 s later.
    await new Promise((r) => setTimeout(r, 300));
    const atCut = await jobRow(id);
    await new Promise((r) => setTimeout(r, 2_000));
    const duringOutage = await jobRow(id);
    const startedDuringOutage = handled.size - handledAtCut;
    await proxy.up();
    const summary = await loop;
    const { rows } = await direct.query<{ n: number; distinct_items: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT message)::int AS distinct_items FROM "JobEvent" WHERE "jobId" = $1 AND type = 'outage-test'`,
      [id],
    );
    await h.m.tenants.deleteTenant(slug);
    return { summary, atCut, duringOutage, written: rows[0]!, startedDuringOutage };
  }

  it("PostgreSQL away: dispatching stops, commits wait, and every item is committed exactly once, none a failure", async () => {
    const total = 400;
    const { summary, atCut, duringOutage, written, startedDuringOutage } = await outageLoop(total, pgProxy);
    expect(atCut.processed).toBeLessThan(total);
    // At most the items already in flight at the cut (8) start: nothing new is dispatched.
    expect(startedDuringOutage).toBeLessThanOrEqual(8);
    expect(duringOutage.processed).toBe(atCut.processed);
    expect(summary).toEqual({ processed: total, failed: 0 });
    expect(written).toEqual({ n: total, distinct_items: total });
  });

  it("Redis away: items wait for it instead of failing, and every item is committed exactly once", async () => {
    const total = 400;
    const { summary, written } = await outageLoop(total, redisProxy);
    expect(summary).toEqual({ processed: total, failed: 0 });
    expect(written).toEqual({ n: total, distinct_items: total });
  });
});

describe("a job during a dependency outage", () => {
  it("PostgreSQL away for 3 s mid-import: the run pauses, then completes with every row exactly once", async () => {
    const rows = 1500;
    const jobId = await h.importOf(rows, "pg-outage");
    const { atCut, duringOutage, outcome } = await runWithOutage(jobId, pgProxy, 3_000);

    // The cut came mid-run, and nothing was written while the database was away.
    expect(atCut.status).toBe("running");
    expect(atCut.processed).toBeLessThan(rows);
    expect(duringOutage.processed).toBe(atCut.processed);
    expect(outcome).toBeUndefined();
    await expectEveryRowOnce(jobId, rows);
  });

  it("Redis away for 3 s mid-import: the run pauses, then completes with every row exactly once", async () => {
    const rows = 1500;
    const jobId = await h.importOf(rows, "redis-outage");
    const { atCut, outcome } = await runWithOutage(jobId, redisProxy, 3_000);

    expect(atCut.status).toBe("running");
    expect(atCut.processed).toBeLessThan(rows);
    expect(outcome).toBeUndefined();
    await expectEveryRowOnce(jobId, rows);
  });
});
