import { migrate } from "../scripts/db/migrate";

/** Brings the test database to the current schema once per run (creating it if needed). */
export default async function setup(): Promise<void> {
  await migrate(`postgresql://postgres@127.0.0.1:5432/${process.env.BOUNDED_TEST_DATABASE ?? "bounded_test"}`);
}
