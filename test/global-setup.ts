import pg from "pg";
import type { TestProject } from "vitest/node";
import { migrate } from "../scripts/db/migrate";
import { TEST_DATABASE, workerDatabase } from "./workers";

const url = (database: string) => `postgresql://postgres@127.0.0.1:5432/${database}`;

/**
 * Once per run, a clean start: the template database is made anew at the current schema (well
 * under a second), and each test worker gets a copy of it — a database of its own, so a test that
 * acts on every job (the reaper, an outage) acts only on the jobs of the files its worker runs, and
 * nothing a test expects depends on what an earlier run left behind.
 */
export default async function setup(project: TestProject): Promise<void> {
  const admin = new pg.Client({ connectionString: url("postgres") });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${TEST_DATABASE}" WITH (FORCE)`);
    await migrate(url(TEST_DATABASE));
    for (let id = 1; id <= project.config.maxWorkers; id++) {
      await admin.query(`DROP DATABASE IF EXISTS "${workerDatabase(id)}" WITH (FORCE)`);
      await admin.query(`CREATE DATABASE "${workerDatabase(id)}" TEMPLATE "${TEST_DATABASE}"`);
    }
  } finally {
    await admin.end();
  }
}
