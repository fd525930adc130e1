/**
 * A system under test for the browser tests: a fresh database and Redis prefix, then the same
 * start script a person runs (`npm start`), in this process so SIGTERM from the runner stops it
 * all. `serve.ts tight` serves the tight-budget system (see TIGHT_ENV); its environment comes
 * from the runner, like the main one's.
 */
import pg from "pg";
import { Redis } from "ioredis";
import { E2E_ENV, TIGHT_ENV } from "./env";

const env = process.argv[2] === "tight" ? TIGHT_ENV : E2E_ENV;
// The start script reads its own arguments: all parts; the tight system serves the build the main
// one (started first) made and is serving — never a rebuild under it, even after a source edit.
process.argv.splice(2, Infinity, ...(env === TIGHT_ENV ? ["--no-build"] : []));
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

await import("../scripts/start");
