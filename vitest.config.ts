import { readdirSync, readFileSync } from "node:fs";
import { defineConfig } from "vitest/config";

/**
 * Test files at once: three on two cores, as most of a test's time is waiting (timers at time scale
 * 0.001, other processes, the database). Alone, three leave the cores idle a quarter of the time
 * (304 s; four took 270 s, five 270 s); but under `npm test` the web app's build takes that quarter,
 * and four made the run no shorter (309 s against 300 s) for more CPU spent loading modules. Each
 * worker gets a database of its own (test/global-setup.ts).
 */
const TEST_WORKERS = Math.max(1, Number(process.env.BOUNDED_TEST_WORKERS ?? 3));

/** Checks that read the code and docs only: a project of their own, runnable without PostgreSQL or Redis. */
const STATIC_CHECKS = ["lib/structure.test.ts", "docs/docs.test.ts", "test/function-length/**/*.test.ts"];
const EXCLUDED = ["node_modules/**", "e2e/**", ".next/**"];

/**
 * Unit tests (`*.test.ts` that are not `*.integration.test.ts`) need no database (test/unit-env.ts
 * gives them none) and run in one module graph per worker instead of a fresh one per file: loading
 * the modules again for each file cost three times the CPU of the tests themselves. Those that
 * replace a module (`vi.mock`) need a graph of their own and run with the integration tests.
 */
const UNIT_TESTS = testFilesUnder("").filter(
  (file) =>
    !file.endsWith(".integration.test.ts") &&
    !STATIC_CHECKS.some((check) => file === check || file.startsWith("test/function-length/")) &&
    !readFileSync(`${import.meta.dirname}/${file}`, "utf8").includes("vi.mock("),
);

/** The `*.test.ts` files below `dir`, leaving out dependencies, builds, browser tests and dot folders. */
function testFilesUnder(dir: string): string[] {
  return readdirSync(`${import.meta.dirname}/${dir}`, { withFileTypes: true }).flatMap((entry) => {
    const path = dir ? `${dir}/${entry.name}` : entry.name;
    if (entry.isDirectory())
      return ["node_modules", "e2e"].includes(entry.name) || entry.name.startsWith(".") ? [] : testFilesUnder(path);
    return entry.name.endsWith(".test.ts") ? [path] : [];
  });
}

// Two projects: the static checks (`npm run test:static`), and everything else against the real
// PostgreSQL and Redis, several files at once: each worker has its own database and key prefix
// (test/worker-env.ts), and each integration test isolates itself within them (own tenants, own
// queue names).
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
    exclude: EXCLUDED,
    pool: "forks",
    maxWorkers: TEST_WORKERS,
    projects: [
      { extends: true, test: { name: "static", include: STATIC_CHECKS } },
      {
        extends: true,
        test: {
          name: "unit",
          include: UNIT_TESTS,
          isolate: false,
          setupFiles: ["./test/unit-env.ts", "./test/outside-state.ts"],
        },
      },
      {
        extends: true,
        test: {
          name: "services",
          include: ["**/*.test.ts"],
          exclude: [...EXCLUDED, ...STATIC_CHECKS, ...UNIT_TESTS],
          globalSetup: ["./test/global-setup.ts"],
          setupFiles: ["./test/worker-env.ts", "./test/outside-state.ts"],
        },
      },
    ],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    env: {
      REDIS_URL: "redis://127.0.0.1:6379",
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
