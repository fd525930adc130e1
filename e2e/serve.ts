/**
 * A system under test for the browser tests: a fresh database and Redis prefix, then the same
 * start script a person runs (`npm start`), in this process so SIGTERM from the runner stops it
 * all. `serve.ts tight` serves the tight-budget system (see TIGHT_ENV); its environment comes
 * from the runner, like the main one's.
 */
import { dropDatabase } from "../scripts/db/migrate";
import { Redis } from "ioredis";
import { E2E_ENV, TIGHT_ENV } from "./env";

const env = process.argv[2] === "tight" ? TIGHT_ENV : E2E_ENV;
// The start script reads its own arguments: all parts; the tight system serves the build the main
// one (started first) made and is serving — never a rebuild under it, even after a source edit.
process.argv.splice(2, Infinity, ...(env === TIGHT_ENV ? ["--no-build"] : []));
await dropDatabase(env.DATABASE_URL);

const redis = new Redis(env.REDIS_URL);
let cursor = "0";
do {
  const [next, keys] = await redis.scan(cursor, "MATCH", `${env.BOUNDED_REDIS_PREFIX}:*`, "COUNT", 1000);
  if (keys.length) await redis.del(...keys);
  cursor = next;
} while (cursor !== "0");
redis.disconnect();

await import("../scripts/start");
