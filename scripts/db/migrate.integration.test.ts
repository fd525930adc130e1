import { randomUUID } from "node:crypto";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { checksumOf, listMigrations, maintenanceUrl, migrate, quoteIdent } from "./migrate";

// Each test gets its own throwaway database on the real PostgreSQL; all are dropped at the end.
const SERVER = "postgresql://postgres@127.0.0.1:5432";
const created: string[] = [];

function freshDatabaseUrl(): string {
  const name = `bounded_migrate_test_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  created.push(name);
  return `${SERVER}/${name}`;
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

afterAll(async () => {
  for (const name of created) {
    await query(maintenanceUrl(`${SERVER}/${name}`), `DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
  }
});

describe("migrate", () => {
  const url = freshDatabaseUrl();

  it("creates a missing database and applies every migration in name order, recording Prisma's sha256 checksums", async () => {
    const migrations = await listMigrations();
    expect(migrations[0]?.name).toMatch(/^\d{14}_init$/);

    const lines: string[] = [];
    const { applied } = await migrate(url, (line) => lines.push(line));

    expect(applied).toEqual(migrations.map((m) => m.name));
    expect(lines[0]).toMatch(/^created database bounded_migrate_test_/);
    const rows = await query<{ migration_name: string; checksum: string; applied_steps_count: number }>(
      url,
      `SELECT migration_name, checksum, applied_steps_count FROM "_prisma_migrations"
       WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL ORDER BY migration_name`,
    );
    expect(rows).toEqual(
      migrations.map((m) => ({ migration_name: m.name, checksum: checksumOf(m.sql), applied_steps_count: 1 })),
    );
  });

  it("seeds the 13 static transaction categories with stable ids", async () => {
    const categories = await query<{ id: number; slug: string; name: string }>(
      url,
      `SELECT id, slug, name FROM "Category" ORDER BY id`,
    );
    expect(categories).toHaveLength(13);
    expect(categories[0]).toEqual({ id: 1, slug: "groceries", name: "Groceries" });
    expect(categories[1]).toEqual({ id: 2, slug: "dining", name: "Restaurants & cafés" });
    expect(categories[12]).toEqual({ id: 13, slug: "other", name: "Other" });
  });

  it("is idempotent: a second run applies nothing and says the database is up to date", async () => {
    const lines: string[] = [];
    const { applied } = await migrate(url, (line) => lines.push(line));
    expect(applied).toEqual([]);
    expect(lines).toEqual(["database is up to date"]);
  });

  it("refuses to run when an applied migration's file no longer matches its recorded checksum", async () => {
    const [first] = await listMigrations();
    await query(url, `UPDATE "_prisma_migrations" SET checksum = $1 WHERE migration_name = $2`, [
      "0".repeat(64),
      first!.name,
    ]);
    await expect(migrate(url)).rejects.toThrow(`Migration ${first!.name} was changed after it was applied`);
  });
});

describe("migrate under concurrency and failure", () => {
  it("applies each migration exactly once when two processes start at the same time", async () => {
    const url = freshDatabaseUrl();
    const [a, b] = await Promise.all([migrate(url), migrate(url)]);
    const names = (await listMigrations()).map((m) => m.name);
    expect([...a.applied, ...b.applied].sort()).toEqual(names);
    const rows = await query<{ count: string }>(url, `SELECT count(*) FROM "_prisma_migrations"`);
    expect(Number(rows[0]!.count)).toBe(names.length);
  });

  it("rolls a failing migration back entirely and does not record it, keeping the ones before it", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "bounded-migrations-"));
    try {
      const write = async (name: string, sql: string) => {
        await mkdir(path.join(dir, name));
        await writeFile(path.join(dir, name, "migration.sql"), sql);
      };
      await write("20000101000000_good", `CREATE TABLE "Good" (id INT);`);
      await write("20000101000001_bad", `CREATE TABLE "Half" (id INT);\nSELECT 1 / 0;`);
      const url = freshDatabaseUrl();

      await expect(migrate(url, () => {}, dir)).rejects.toThrow(
        /20000101000001_bad failed and was rolled back: division by zero/,
      );

      const tables = await query<{ table_name: string }>(
        url,
        `SELECT table_name FROM information_schema.tables WHERE table_name IN ('Good', 'Half')`,
      );
      expect(tables.map((t) => t.table_name)).toEqual(["Good"]);
      const recorded = await query<{ migration_name: string }>(url, `SELECT migration_name FROM "_prisma_migrations"`);
      expect(recorded.map((r) => r.migration_name)).toEqual(["20000101000000_good"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
