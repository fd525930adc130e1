import pg from "pg";
import { E2E_ENV } from "./env";

/** Direct reads of the system's database, to check what the browser cannot see. */
export async function sql<T extends pg.QueryResultRow = Record<string, unknown>>(
  text: string,
  params: unknown[] = [],
  databaseUrl: string = E2E_ENV.DATABASE_URL,
): Promise<T[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query<T>(text, params)).rows;
  } finally {
    await client.end();
  }
}
