/**
 * A system under test for the browser tests: a fresh database and Redis prefix, then the same
 * start script a person runs (`npm start`), in this process so SIGTERM from the runner stops it
 * all. `serve.ts tight` serves the tight-budget system (see TIGHT_ENV), `serve.ts default` the one
 * with nothing overridden (DEFAULT_ENV), `serve.ts fanout` the one where files outgrow a budget
 * (FANOUT_ENV); its environment comes
 * from the runner, like the main one's.
 */
import { dropDatabase } from "../scripts/db/migrate";
import { Redis } from "ioredis";
import { scanKeys } from "../lib/redis/client";
import { DEFAULT_ENV, E2E_ENV, FANOUT_ENV, TIGHT_ENV } from "./env";

const systems = { tight: TIGHT_ENV, default: DEFAULT_ENV, fanout: FANOUT_ENV } as const;
const which = process.argv[2] as keyof typeof systems | undefined;
const env = which && Object.hasOwn(systems, which) ? systems[which] : E2E_ENV;
// The start script reads its own arguments: all parts; the other systems serve the build the main
// one (started first) made and is serving — never a rebuild under it, even after a source edit.
process.argv.splice(2, Infinity, ...(env === E2E_ENV ? [] : ["--no-build"]));
await dropDatabase(env.DATABASE_URL);

const redis = new Redis(env.REDIS_URL);
for await (const keys of scanKeys(redis, `${env.BOUNDED_REDIS_PREFIX}:*`, 1000))
  if (keys.length) await redis.del(...keys);
redis.disconnect();

await import("../scripts/start");
