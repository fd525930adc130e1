import { createHash, randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
// Relative, not "@/…": tsx only maps tsconfig paths when started from the repository root.
import { env } from "../../lib/env";

/**
 * Applies prisma/migrations with plain `pg`, because the Prisma CLI's native schema engine
 * cannot be downloaded here. The bookkeeping is Prisma's own (`_prisma_migrations`, sha256
 * checksums, the same advisory lock), so `prisma migrate deploy` accepts the history wherever
 * it can run, and the two never migrate the same database at once.
 */

/** prisma/migrations of this repository, wherever the process was started from. */
export const MIGRATIONS_DIR = path.resolve(import.meta.dirname, "../../prisma/migrations");

/** The key Prisma Migrate itself locks on (prisma-engines, postgres connector). */
const PRISMA_MIGRATE_LOCK = 72707369;

/** Exactly the table Prisma's schema engine creates, so Prisma can read and extend our rows. */
const CREATE_MIGRATIONS_TABLE = `
  CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    id                      VARCHAR(36) PRIMARY KEY NOT NULL,
    checksum                VARCHAR(64) NOT NULL,
    finished_at             TIMESTAMPTZ,
    migration_name          VARCHAR(255) NOT NULL,
    logs                    TEXT,
    rolled_back_at          TIMESTAMPTZ,
    started_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    applied_steps_count     INTEGER NOT NULL DEFAULT 0
  )`;

/** A refusal worth showing as is (bad history, a failed migration); not a bug. */
export class MigrationError extends Error {
  override name = "MigrationError";
}

export interface MigrationFile {
  name: string;
  sql: string;
  checksum: string;
}

export function checksumOf(sql: string): string {
  return createHash("sha256").update(sql, "utf8").digest("hex");
}

/** The `<timestamp>_<name>/migration.sql` folders, in name order (the order Prisma applies them). */
export async function listMigrations(dir: string = MIGRATIONS_DIR): Promise<MigrationFile[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return [];
    throw error;
  });
  const names = entries
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)); // code-unit order, not the locale's
  const migrations: MigrationFile[] = [];
  for (const name of names) {
    const file = path.join(dir, name, "migration.sql");
    const sql = await readFile(file, "utf8").catch(() => {
      throw new MigrationError(`${file} is missing: every folder in ${dir} must hold a migration.sql.`);
    });
    migrations.push({ name, sql, checksum: checksumOf(sql) });
  }
  return migrations;
}

/** The same server, but the `postgres` maintenance database (to create or drop others). */
export function maintenanceUrl(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  url.pathname = "/postgres";
  return url.toString();
}

export function databaseName(databaseUrl: string): string {
  const name = decodeURIComponent(new URL(databaseUrl).pathname.slice(1));
  if (!name) throw new MigrationError("DATABASE_URL names no database (expected postgresql://…/<name>).");
  return name;
}

export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

function client(connectionString: string): pg.Client {
  // Without a timeout a black-holed host would hang the deploy forever.
  const c = new pg.Client({ connectionString, connectionTimeoutMillis: 10_000 });
  // A connection dropped between queries is reported by the next query; don't crash on the event.
  c.on("error", () => {});
  return c;
}

/** Drops the database if it exists, closing its sessions (test and benchmark databases). */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const admin = client(maintenanceUrl(databaseUrl));
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(databaseName(databaseUrl))} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/** Creates the database when it does not exist yet; returns whether it did. */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const name = databaseName(databaseUrl);
  const admin = client(maintenanceUrl(databaseUrl));
  await admin.connect();
  try {
    const found = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (found.rowCount) return false;
    try {
      await admin.query(`CREATE DATABASE ${quoteIdent(name)}`);
      return true;
    } catch (error) {
      // Another process created it between our check and our CREATE: that is fine.
      const code = (error as { code?: string }).code;
      if (code === "42P04" || code === "23505") return false;
      throw error;
    }
  } finally {
    await admin.end();
  }
}

interface AppliedRow {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
}

/** Prisma also accepts a file whose checksum matches once CRLF line ends become LF (git autocrlf). */
export function sameChecksum(file: MigrationFile, recorded: string): boolean {
  return recorded === file.checksum || recorded === checksumOf(file.sql.replaceAll("\r\n", "\n"));
}

/**
 * Brings the database at `databaseUrl` up to the migrations in `dir`: creates the database if
 * needed, then applies every migration not yet recorded, each in its own transaction.
 */
export async function migrate(
  databaseUrl: string,
  log: (line: string) => void = () => {},
  dir: string = MIGRATIONS_DIR,
): Promise<{ applied: string[] }> {
  const migrations = await listMigrations(dir);
  if (await ensureDatabase(databaseUrl)) log(`created database ${databaseName(databaseUrl)}`);

  const db = client(databaseUrl);
  await db.connect();
  try {
    // Session lock: a second process waits here and then finds nothing left to do.
    await db.query("SELECT pg_advisory_lock($1)", [PRISMA_MIGRATE_LOCK]);
    await db.query(CREATE_MIGRATIONS_TABLE);

    const rows = (
      await db.query<AppliedRow>(
        `SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations"
         WHERE rolled_back_at IS NULL ORDER BY started_at`,
      )
    ).rows;
    const files = new Map(migrations.map((m) => [m.name, m]));
    const applied = new Set<string>();
    for (const row of rows) {
      // Only the real Prisma leaves unfinished rows (it records before running); it refuses too (P3009).
      if (row.finished_at === null) {
        throw new MigrationError(
          `Migration ${row.migration_name} failed earlier and is still marked as started in _prisma_migrations. ` +
            `Repair the database, then mark it rolled back (set rolled_back_at) before migrating again.`,
        );
      }
      const file = files.get(row.migration_name);
      if (file && !sameChecksum(file, row.checksum)) {
        throw new MigrationError(
          `Migration ${row.migration_name} was changed after it was applied (checksum ${row.checksum.slice(0, 12)}… in the database, ` +
            `${file.checksum.slice(0, 12)}… on disk). Restore the original file and put the change in a new migration.`,
        );
      }
      if (!file) log(`warning: ${row.migration_name} is applied but not in ${dir}`);
      applied.add(row.migration_name);
    }

    const done: string[] = [];
    for (const migration of migrations) {
      if (applied.has(migration.name)) continue;
      // One transaction per migration: a failure leaves neither half a schema nor a history row.
      await db.query("BEGIN");
      try {
        await db.query(migration.sql);
        await db.query(
          `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, finished_at, applied_steps_count)
           VALUES ($1, $2, $3, now(), clock_timestamp(), 1)`,
          [randomUUID(), migration.checksum, migration.name],
        );
        await db.query("COMMIT");
      } catch (error) {
        await db.query("ROLLBACK").catch(() => {});
        throw new MigrationError(
          `Migration ${migration.name} failed and was rolled back: ${(error as Error).message}`,
          { cause: error },
        );
      }
      log(`applied ${migration.name}`);
      done.push(migration.name);
    }
    if (done.length === 0) log("database is up to date");
    return { applied: done };
  } finally {
    // Closing the session also releases the advisory lock.
    await db.end().catch(() => {});
  }
}

/** One line a person can act on, for the errors a deploy really meets. */
export function describeFailure(error: unknown, databaseUrl: string, what = "Migrating"): string {
  if (error instanceof MigrationError) return error.message;
  const url = new URL(databaseUrl);
  const where = `PostgreSQL at ${url.hostname}:${url.port || "5432"} (DATABASE_URL)`;
  const err = error as { code?: string; message?: string; errors?: { code?: string }[] };
  // Node reports "localhost" refusals on both ::1 and 127.0.0.1 as one AggregateError.
  const code = err.code ?? err.errors?.[0]?.code;
  const fix = "Start PostgreSQL or fix DATABASE_URL.";
  switch (code) {
    case "ECONNREFUSED":
      return `Cannot reach ${where}: connection refused. ${fix}`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `Cannot reach ${where}: host not found. ${fix}`;
    case "ETIMEDOUT":
      return `Cannot reach ${where}: connection timed out. ${fix}`;
    case "28P01":
    case "28000":
      return `${where} refused the login: ${err.message}. Fix the user or password in DATABASE_URL.`;
    case "42501":
      return `${where}: permission denied (${err.message}). The user needs CREATEDB, or create the database by hand.`;
    default:
      // Other codes, and errors without one, are told by their message below.
      break;
  }
  if (err.message?.includes("timeout expired")) return `Cannot reach ${where}: connection timed out. ${fix}`;
  return `${what} failed: ${err.message ?? String(error)}`;
}

async function main(): Promise<void> {
  let databaseUrl = "";
  try {
    databaseUrl = env().DATABASE_URL;
    await migrate(databaseUrl, (line) => console.log(line));
  } catch (error) {
    console.error(databaseUrl ? describeFailure(error, databaseUrl) : (error as Error).message);
    process.exitCode = 1;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === import.meta.filename) await main();
