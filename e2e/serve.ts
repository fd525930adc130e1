/**
 * The web server of the browser tests: a fresh database and Redis prefix, then the same start
 * script a person runs (`npm start`), in this process so SIGTERM from the runner stops it all.
 */
import pg from "pg";
import { Redis } from "ioredis";
import { E2E_ENV } from "./env";

const admin = new pg.Client({ connectionString: E2E_ENV.DATABASE_URL.replace(/\/[^/]+$/, "/postgres") });
await admin.connect();
await admin.query("DROP DATABASE IF EXISTS bounded_e2e WITH (FORCE)");
await admin.end();

const redis = new Redis(E2E_ENV.REDIS_URL);
let cursor = "0";
do {
  const [next, keys] = await redis.scan(cursor, "MATCH", `${E2E_ENV.BOUNDED_REDIS_PREFIX}:*`, "COUNT", 1000);
  if (keys.length) await redis.del(...keys);
  cursor = next;
} while (cursor !== "0");
redis.disconnect();

await import("../scripts/start");
