import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { dropDatabase, migrate } from "./migrate";
import { formatStatus, migrationStatus } from "./status";

// Throwaway databases on the real PostgreSQL, dropped at the end.
const SERVER = "postgresql://postgres@127.0.0.1:5432";
const created: string[] = [];
const dirs: string[] = [];

function freshDatabaseUrl(): string {
  const name = `bounded_status_test_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  created.push(`${SERVER}/${name}`);
  return `${SERVER}/${name}`;
}

async function migrationsDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "bounded-status-"));
  dirs.push(dir);
  for (const [name, sql] of Object.entries(files)) {
    await mkdir(path.join(dir, name));
    await writeFile(path.join(dir, name, "migration.sql"), sql);
  }
  return dir;
}

async function exec(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

afterAll(async () => {
  for (const url of created) await dropDatabase(url);
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe("migrationStatus", () => {
  it("lists applied and pending migrations, and is up to date once all are applied", async () => {
    const url = freshDatabaseUrl();
    const dir = await migrationsDir({
      "20260101000000_a": "CREATE TABLE a (id int);",
      "20260102000000_b": "CREATE TABLE b (id int);",
    });
    await migrate(url, () => {}, dir);
    expect(await migrationStatus(url, dir)).toEqual({
      applied: ["20260101000000_a", "20260102000000_b"],
      pending: [],
      drift: [],
      upToDate: true,
    });

    await mkdir(path.join(dir, "20260103000000_c"));
    await writeFile(path.join(dir, "20260103000000_c", "migration.sql"), "CREATE TABLE c (id int);");
    const status = await migrationStatus(url, dir);
    expect(status).toMatchObject({ pending: ["20260103000000_c"], drift: [], upToDate: false });
    expect(formatStatus(status, "x")).toContain("  pending   20260103000000_c");
  });

  it("reports drift: a file changed after it was applied, and an applied migration without a folder", async () => {
    const url = freshDatabaseUrl();
    const dir = await migrationsDir({
      "20260101000000_a": "CREATE TABLE a (id int);",
      "20260102000000_b": "CREATE TABLE b (id int);",
    });
    await migrate(url, () => {}, dir);
    await writeFile(path.join(dir, "20260101000000_a", "migration.sql"), "CREATE TABLE a (id bigint);");
    await rm(path.join(dir, "20260102000000_b"), { recursive: true });

    const status = await migrationStatus(url, dir);
    expect(status.upToDate).toBe(false);
    expect(status.pending).toEqual([]);
    expect(status.drift).toEqual([
      expect.objectContaining({ name: "20260101000000_a", problem: "changed" }),
      { name: "20260102000000_b", problem: "missing_folder" },
    ]);
    const lines = formatStatus(status, "x");
    expect(lines.some((l) => l.includes("20260101000000_a: changed after it was applied"))).toBe(true);
    expect(lines.some((l) => l.includes("20260102000000_b: applied, but has no folder"))).toBe(true);
  });

  it("calls everything pending on a database that was never migrated", async () => {
    const url = freshDatabaseUrl();
    await exec(`${SERVER}/postgres`, `CREATE DATABASE ${new URL(url).pathname.slice(1)}`);
    const dir = await migrationsDir({ "20260101000000_a": "SELECT 1;" });
    expect(await migrationStatus(url, dir)).toMatchObject({
      applied: [],
      pending: ["20260101000000_a"],
      upToDate: false,
    });
  });
});

describe("npm run db:status", () => {
  const run = (url: string) =>
    promisify(execFile)(
      path.resolve(import.meta.dirname, "../../node_modules/.bin/tsx"),
      [path.resolve(import.meta.dirname, "status.ts")],
      {
        env: { ...process.env, DATABASE_URL: url },
      },
    ).then(
      ({ stdout }) => ({ code: 0, stdout }),
      (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
    );

  it("exits 0 when the database has every migration of the project, 1 when it has drift", async () => {
    const url = freshDatabaseUrl();
    await migrate(url);
    const clean = await run(url);
    expect(clean.code).toBe(0);
    expect(clean.stdout).toMatch(/up to date/);

    await exec(
      url,
      `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, finished_at, applied_steps_count) VALUES ('${randomUUID()}', 'x', '29990101000000_elsewhere', now(), 1)`,
    );
    const drifted = await run(url);
    expect(drifted.code).toBe(1);
    expect(drifted.stdout).toContain("29990101000000_elsewhere: applied, but has no folder");
  });
});
