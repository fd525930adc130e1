import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startImportHarness } from "@/test/helpers/import-harness";
import { waitFor } from "@/test/helpers/wait";

// The reference cache, proven on the database's own counters: pg_stat_user_tables, each snapshot
// read in its own autocommit statement on a fresh connection (inside one transaction PostgreSQL
// freezes the statistics snapshot).
const DATABASE_URL = process.env.DATABASE_URL!;
let h: Awaited<ReturnType<typeof startImportHarness>>;
let cache: typeof import("./cache");

async function categoryReads(): Promise<{ seq: number; idx: number }> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT coalesce(seq_scan, 0) AS seq, coalesce(idx_scan, 0) AS idx FROM pg_stat_user_tables WHERE relname = 'Category'`,
    );
    return { seq: Number(rows[0].seq), idx: Number(rows[0].idx) };
  } finally {
    await client.end();
  }
}

async function databaseNow(): Promise<Date> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    return (await client.query<{ now: Date }>(`SELECT clock_timestamp() AS now`)).rows[0]!.now;
  } finally {
    await client.end();
  }
}

/**
 * Waits until every client backend of this database that started at `since` or later has ended.
 * A backend flushes its table counters on exit before it leaves pg_stat_activity, so once the
 * pool's backends are gone, what they read is in pg_stat_user_tables.
 */
async function backendsEnded(since: Date): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await waitFor(
      async () => {
        const { rows } = await client.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND backend_start >= $1`,
          [since],
        );
        return rows[0]!.n === 0;
      },
      { timeoutMs: 10_000, what: "the closed pool's backends to end" },
    );
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  h = await startImportHarness();
  cache = await import("./cache");
});
afterAll(() => h.close());

describe("Category reference cache", () => {
  it("importing 1,000 rows runs no per-row query against Category", async () => {
    const jobId = await h.importOf(1000, "catcache");
    // Backends flush their counters when they end: start from a closed pool, end with one.
    await h.m.db.closeDb();
    const before = await categoryReads();
    const poolOpened = await databaseNow();

    await h.run(jobId);
    const job = await h.m.db.db().job.findUniqueOrThrow({ where: { id: jobId } });
    expect(job).toMatchObject({ status: "completed", processed: 1000 });
    await h.m.db.closeDb();
    await backendsEnded(poolOpened);

    const after = await categoryReads();
    // One load for the process (other suites sharing this database may add a few); per-row reads
    // would be ≥ 1,000. Each Transaction insert also checks its foreign key with one index probe
    // of Category's primary key: that is PostgreSQL's, not the application's, so it is subtracted.
    expect(after.seq - before.seq).toBeLessThan(20);
    expect(after.idx - before.idx - job.processed).toBeLessThan(20);
  }, 60_000);

  it("a change to Category, however it is made, drops every process's cache", async () => {
    const stop = await cache.listenForCategoryChanges();
    try {
      const first = await cache.getCategories();
      expect(await cache.getCategories()).toBe(first); // served from the cache
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      const original = first.find((c) => c.slug === "fees")!.name;
      try {
        await client.query(`UPDATE "Category" SET name = 'Bank charges' WHERE slug = 'fees'`);
        await expect
          .poll(async () => (await cache.getCategories()).find((c) => c.slug === "fees")?.name, {
            timeout: 5000,
            interval: 50,
          })
          .toBe("Bank charges");
      } finally {
        await client.query(`UPDATE "Category" SET name = $1 WHERE slug = 'fees'`, [original]);
        await client.end();
      }
    } finally {
      await stop();
    }
  });
});
