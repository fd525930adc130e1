import { defineConfig } from "vitest/config";

// Two people (or two checkouts) testing on one machine give each run its own database and prefix.
const database = process.env.BOUNDED_TEST_DATABASE ?? "bounded_test";
const prefix = process.env.BOUNDED_TEST_REDIS_PREFIX ?? "bounded-test";

// Tests run against the real PostgreSQL and Redis; each integration test isolates itself
// (own database rows, own queue names, own key prefix).
export default defineConfig({
  resolve: {
    alias: {
      "@": import.meta.dirname,
      // `server-only` throws outside React Server Components; the domain is plain Node here.
      "server-only": `${import.meta.dirname}/test/server-only-stub.ts`,
    },
  },
  test: {
    environment: "node",
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**", "e2e/**", ".next/**"],
    fileParallelism: false,
    globalSetup: ["./test/global-setup.ts"],
    setupFiles: ["./test/outside-state.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    env: {
      DATABASE_URL: `postgresql://postgres@127.0.0.1:5432/${database}`,
      REDIS_URL: "redis://127.0.0.1:6379",
      BOUNDED_REDIS_PREFIX: prefix,
      BOUNDED_TIME_SCALE: "0.001",
      // A job projected not to fit would split itself, and the projection reads what earlier runs
      // on this database measured: tests of deadlines would not be repeatable. The fan-out tests
      // turn it on for themselves.
      BOUNDED_AUTO_SPLIT: "0",
      // Imports with the generous budgets tests give them would send their rows to the batch
      // service and wait for it; the batch lane's tests turn it on for themselves.
      BOUNDED_BATCH_LANE_KINDS: "none",
      LOG_LEVEL: "silent",
      NODE_ENV: "test",
    },
  },
});
