/**
 * How the test files share this machine: several run at once (vitest.config.ts), each worker on a
 * database and a Redis prefix of its own (`test/worker-env.ts` points the worker at them). Two
 * people (or two checkouts) testing on one machine give each run its own names.
 */
export const TEST_DATABASE = process.env.BOUNDED_TEST_DATABASE ?? "bounded_test";
export const TEST_REDIS_PREFIX = process.env.BOUNDED_TEST_REDIS_PREFIX ?? "bounded-test";
export const workerDatabase = (id: number) => `${TEST_DATABASE}_${id}`;
export const workerRedisPrefix = (id: number) => `${TEST_REDIS_PREFIX}-${id}`;
