import pg from "pg";
import type { TestProject } from "vitest/node";
import { migrate } from "../scripts/db/migrate";
import { TEST_DATABASE, workerDatabase } from "./workers";

const url = (database: string) => `postgresql://postgres@127.0.0.1:5432/${database}`;

/**
 * Once per run, a clean start: the template database is made anew at the current schema (well
 * under a second), and each test worker gets a copy of it — a database of its own, so a test that
 * acts on every job (the reaper, an outage) acts only on the jobs of the files its worker runs, and
 * nothing a test expects depends on what an earlier run left behind. The copies are named after the
 * run; earlier runs' copies are dropped first, which also cuts off any process a killed run left
 * running (a worker process a test started), and this run's are dropped when it ends.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const run = Date.now().toString(36);
  const admin = new pg.Client({ connectionString: url("postgres") });
  await admin.connect();
  const drop = (name: string) => admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  try {
    const earlier = await admin.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE $1", [
      `${TEST_DATABASE.replace(/[_%\\]/g, "\\$&")}\\_%`,
    ]);
    for (const { datname } of earlier.rows) await drop(datname);
    await drop(TEST_DATABASE);
    await migrate(url(TEST_DATABASE));
    for (let id = 1; id <= project.config.maxWorkers; id++)
      await admin.query(`CREATE DATABASE "${workerDatabase(run, id)}" TEMPLATE "${TEST_DATABASE}"`);
  } catch (err) {
    await admin.end();
    throw err;
  }
  project.provide("testRun", run);
  return async () => {
    try {
      for (let id = 1; id <= project.config.maxWorkers; id++) await drop(workerDatabase(run, id));
    } finally {
      await admin.end();
    }
  };
}
