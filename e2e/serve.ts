/**
 * A system under test for the browser tests: a fresh database and Redis prefix, then the same
 * start script a person runs (`npm start`), in this process so SIGTERM from the runner stops it
 * all. `serve.ts tight` serves the tight-budget system (see TIGHT_ENV); its environment comes
 * from the runner, like the main one's.
 */
import { utimesSync } from "node:fs";
import pg from "pg";
import { Redis } from "ioredis";
import { E2E_ENV, TIGHT_ENV } from "./env";

const env = process.argv[2] === "tight" ? TIGHT_ENV : E2E_ENV;
process.argv.splice(2); // the start script reads its own arguments: all parts
const database = new URL(env.DATABASE_URL).pathname.slice(1);

const admin = new pg.Client({ connectionString: env.DATABASE_URL.replace(/\/[^/]+$/, "/postgres") });
await admin.connect();
await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
await admin.end();

const redis = new Redis(env.REDIS_URL);
let cursor = "0";
do {
  const [next, keys] = await redis.scan(cursor, "MATCH", `${env.BOUNDED_REDIS_PREFIX}:*`, "COUNT", 1000);
  if (keys.length) await redis.del(...keys);
  cursor = next;
} while (cursor !== "0");
redis.disconnect();

if (env === TIGHT_ENV) {
  // The main system (started first) built the app and is serving it: never rebuild under it, even
  // when a source was edited since.
  const now = new Date();
  utimesSync(".next/BUILD_ID", now, now);
}

await import("../scripts/start");
