/**
 * How the test files share this machine: several run at once (vitest.config.ts), each worker on a
 * database and a Redis prefix of its own (`test/worker-env.ts` points the worker at them), named
 * after the run, so nothing an earlier run left running (a process of a run that was killed) can
 * touch this one's. Two people (or two checkouts) testing on one machine give each its own names.
 */
export const TEST_DATABASE = process.env.BOUNDED_TEST_DATABASE ?? "bounded_test";
export const TEST_REDIS_PREFIX = process.env.BOUNDED_TEST_REDIS_PREFIX ?? "bounded-test";
export const workerDatabase = (run: string, id: number) => `${TEST_DATABASE}_${run}_${id}`;
export const workerRedisPrefix = (run: string, id: number) => `${TEST_REDIS_PREFIX}-${run}-${id}`;

declare module "vitest" {
  export interface ProvidedContext {
    /** This run's name (test/global-setup.ts): part of its workers' database and prefix names. */
    testRun: string;
  }
}
