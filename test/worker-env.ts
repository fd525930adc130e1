import { inject } from "vitest";
import { workerDatabase, workerRedisPrefix } from "./workers";

// Before each test file, before it imports anything: its worker's own database and Redis prefix
// (VITEST_POOL_ID is 1 … maxWorkers). Child processes the tests start inherit them.
const run = inject("testRun");
const id = Number(process.env.VITEST_POOL_ID ?? 1);
process.env.DATABASE_URL = `postgresql://postgres@127.0.0.1:5432/${workerDatabase(run, id)}`;
process.env.BOUNDED_REDIS_PREFIX = workerRedisPrefix(run, id);
