import http from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

// The reference cache, proven on the database's own counters: pg_stat_user_tables, each snapshot
// read in its own autocommit statement on a fresh connection (inside one transaction PostgreSQL
// freezes the statistics snapshot).
const DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/bounded_test";
let server: http.Server;
const tenants: string[] = [];

type Modules = {
  db: typeof import("@/lib/db/client");
  cache: typeof import("./cache");
  createImport: typeof import("@/lib/imports/create-import");
  queues: typeof import("@/lib/queues/queues");
  redis: typeof import("@/lib/redis/client");
  runtime: typeof import("@/workers/runtime");
  csv: typeof import("@/workers/processors/csv-import");
  log: typeof import("@/lib/log");
  tenants: typeof import("@/test/helpers/tenants");
  jobs: typeof import("@/test/helpers/jobs");
};
let m: Modules;

async function categoryReads(): Promise<{ seq: number; idx: number }> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query(`SELECT coalesce(seq_scan, 0) AS seq, coalesce(idx_scan, 0) AS idx FROM pg_stat_user_tables WHERE relname = 'Category'`);
    return { seq: Number(rows[0].seq), idx: Number(rows[0].idx) };
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  // The environment is parsed once, on first use: stub it before importing anything that reads it.
  let handle: http.RequestListener = () => undefined;
  server = http.createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  vi.stubEnv("MODEL_BASE_URL", `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_SOFT_S", "600000");
  vi.stubEnv("BOUNDED_BUDGET_IMPORTS_HARD_S", "900000");
  const { createRouter } = await import("@/workers/simulators/router");
  const { createModelSimulator } = await import("@/workers/simulators/model");
  handle = createRouter(createModelSimulator({ errorRate: 0, timeScale: 0.0002 }).routes);
  m = {
    db: await import("@/lib/db/client"),
    cache: await import("./cache"),
    createImport: await import("@/lib/imports/create-import"),
    queues: await import("@/lib/queues/queues"),
    redis: await import("@/lib/redis/client"),
    runtime: await import("@/workers/runtime"),
    csv: await import("@/workers/processors/csv-import"),
    log: await import("@/lib/log"),
    tenants: await import("@/test/helpers/tenants"),
    jobs: await import("@/test/helpers/jobs"),
  };
});

afterAll(async () => {
  for (const slug of tenants) await m.tenants.deleteTenant(slug);
  await m.queues.closeQueues();
  await m.redis.closeRedis();
  await m.db.closeDb();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("Category reference cache", () => {
  it("importing 1,000 rows runs no per-row query against Category", async () => {
    const lines = ["date,amount,currency,counterparty,description"];
    for (let i = 1; i <= 1000; i++) lines.push(`2026-02-${String((i % 28) + 1).padStart(2, "0")},-${i}.25,EUR,REWE Markt,row ${i}`);
    const tenant = m.tenants.uniqueTenantSlug("catcache");
    tenants.push(tenant);
    const created = await m.createImport.createImport({ tenant, filename: "a.csv", bytes: new TextEncoder().encode(lines.join("\n")) });
    if (created.type !== "created") throw new Error(created.message);
    await m.queues.queue("imports").remove(created.jobId);
    // Backends flush their counters when they end: start from a closed pool, end with one.
    await m.db.closeDb();
    const before = await categoryReads();

    await m.runtime.runJob({ csv_import: m.csv.csvImport }, m.jobs.queueJobFor(created.jobId), new AbortController().signal, m.log.logger("test"));
    const job = await m.db.db().job.findUniqueOrThrow({ where: { id: created.jobId } });
    expect(job).toMatchObject({ status: "completed", processed: 1000 });
    await m.db.closeDb();
    await new Promise((r) => setTimeout(r, 200));

    const after = await categoryReads();
    // One load for the process (other suites sharing this database may add a few); per-row reads
    // would be ≥ 1,000. Each Transaction insert also checks its foreign key with one index probe
    // of Category's primary key: that is PostgreSQL's, not the application's, so it is subtracted.
    expect(after.seq - before.seq).toBeLessThan(20);
    expect(after.idx - before.idx - job.processed).toBeLessThan(20);
  }, 60_000);

  it("a change to Category, however it is made, drops every process's cache", async () => {
    const stop = await m.cache.listenForCategoryChanges();
    try {
      const first = await m.cache.getCategories();
      expect(await m.cache.getCategories()).toBe(first); // served from the cache
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      const original = first.find((c) => c.slug === "fees")!.name;
      try {
        await client.query(`UPDATE "Category" SET name = 'Bank charges' WHERE slug = 'fees'`);
        await expect
          .poll(async () => (await m.cache.getCategories()).find((c) => c.slug === "fees")?.name, { timeout: 5000, interval: 50 })
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
