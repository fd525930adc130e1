import path from "node:path";
import pg from "pg";
// Relative, not "@/…": tsx only maps tsconfig paths when started from the repository root.
import { env } from "../../lib/env";
import {
  databaseName,
  describeFailure,
  listMigrations,
  MIGRATIONS_DIR,
  sameChecksum,
  type MigrationFile,
} from "./migrate";

/**
 * `npm run db:status`: which migrations of prisma/migrations the database has, which are pending,
 * and drift — an applied migration whose file changed since (checksum), or one applied that has
 * no folder here. Offline like `db:migrate` (plain `pg`, Prisma's sha256 checksums); read-only.
 * Exit code 0 when up to date, 1 when anything is pending or drifted (or the database cannot be read).
 */

export interface AppliedMigration {
  name: string;
  checksum: string;
  finishedAt: Date | null;
}

export type Drift =
  | { name: string; problem: "changed"; recorded: string; onDisk: string }
  | { name: string; problem: "missing_folder" }
  | { name: string; problem: "unfinished" };

export interface MigrationStatus {
  applied: string[];
  pending: string[];
  drift: Drift[];
  upToDate: boolean;
}

/** The comparison itself, from what the database recorded and what is on disk. */
export function compareMigrations(files: MigrationFile[], recorded: AppliedMigration[]): MigrationStatus {
  const onDisk = new Map(files.map((f) => [f.name, f]));
  const drift: Drift[] = [];
  const applied: string[] = [];
  for (const row of recorded) {
    const file = onDisk.get(row.name);
    // Prisma records a migration before it runs it: an unfinished row is a migration that failed.
    if (row.finishedAt === null) drift.push({ name: row.name, problem: "unfinished" });
    else if (!file) drift.push({ name: row.name, problem: "missing_folder" });
    else if (!sameChecksum(file, row.checksum))
      drift.push({ name: row.name, problem: "changed", recorded: row.checksum, onDisk: file.checksum });
    if (row.finishedAt !== null) applied.push(row.name);
  }
  const done = new Set(applied);
  const pending = files.filter((f) => !done.has(f.name)).map((f) => f.name);
  return { applied, pending, drift, upToDate: pending.length === 0 && drift.length === 0 };
}

/** Reads `_prisma_migrations` (a database without it has applied nothing) and compares. */
export async function migrationStatus(databaseUrl: string, dir: string = MIGRATIONS_DIR): Promise<MigrationStatus> {
  const files = await listMigrations(dir);
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 10_000 });
  client.on("error", () => {});
  await client.connect();
  try {
    const table = await client.query<{ present: boolean }>(
      `SELECT to_regclass('"_prisma_migrations"') IS NOT NULL AS present`,
    );
    const rows = table.rows[0]?.present
      ? (
          await client.query<{ migration_name: string; checksum: string; finished_at: Date | null }>(
            `SELECT migration_name, checksum, finished_at FROM "_prisma_migrations" WHERE rolled_back_at IS NULL ORDER BY started_at, migration_name`,
          )
        ).rows
      : [];
    return compareMigrations(
      files,
      rows.map((r) => ({ name: r.migration_name, checksum: r.checksum, finishedAt: r.finished_at })),
    );
  } finally {
    await client.end().catch(() => {});
  }
}

/** The report a person reads, one line per migration. */
export function formatStatus(status: MigrationStatus, database: string): string[] {
  const lines = [
    `database ${database}: ${status.applied.length} applied, ${status.pending.length} pending, ${status.drift.length} drifted`,
  ];
  const drifted = new Map(status.drift.map((d) => [d.name, d]));
  for (const name of status.applied) if (!drifted.has(name)) lines.push(`  applied   ${name}`);
  for (const name of status.pending) lines.push(`  pending   ${name}`);
  for (const d of status.drift) {
    if (d.problem === "changed")
      lines.push(
        `  DRIFT     ${d.name}: changed after it was applied (checksum ${d.recorded.slice(0, 12)}… in the database, ${d.onDisk.slice(0, 12)}… on disk)`,
      );
    else if (d.problem === "missing_folder")
      lines.push(`  DRIFT     ${d.name}: applied, but has no folder in prisma/migrations`);
    else
      lines.push(
        `  DRIFT     ${d.name}: started but never finished (a failed migration); repair it, then mark it rolled back`,
      );
  }
  lines.push(
    status.upToDate
      ? "up to date"
      : status.drift.length > 0
        ? "drift found: the database and prisma/migrations disagree"
        : "pending migrations: run npm run db:migrate",
  );
  return lines;
}

async function main(): Promise<void> {
  let databaseUrl = "";
  try {
    databaseUrl = env().DATABASE_URL;
    const status = await migrationStatus(databaseUrl);
    for (const line of formatStatus(status, databaseName(databaseUrl))) console.log(line);
    process.exitCode = status.upToDate ? 0 : 1;
  } catch (error) {
    console.error(
      databaseUrl ? describeFailure(error, databaseUrl, "Reading the migration status") : (error as Error).message,
    );
    process.exitCode = 1;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === import.meta.filename) await main();
