import { formatReport, runChaos } from "../test/chaos/chaos";
import { defaultRun, regressionSeeds } from "../test/chaos/runs";
import { expect, test } from "./fixtures";

/**
 * The small chaos run (the full one is `npm run test:chaos`): 40 mixed jobs through the API of a
 * system of its own — two worker processes SIGKILLed at random and restarted, its Redis killed
 * and restarted once, its web process once — then every row terminal within its bound, nothing
 * lost, no item applied twice, the quota books balanced. It serves the build the suite made.
 */
test("40 mixed jobs survive worker kills, a Redis restart and a web restart", async () => {
  test.setTimeout(600_000);
  const report = await runChaos({
    jobs: 40,
    seconds: 25,
    seed: 20261202,
    timeScale: 0.01,
    workers: 2,
    killEvery: [2, 5],
    ports: { web: 3103, sim: 4113, redis: 6393 },
    database: "bounded_e2e_chaos",
    log: () => undefined,
  });
  const printed = formatReport(report);
  console.log(printed);
  expect(report.did.workerKills, "worker processes were killed").toBeGreaterThan(0);
  expect(report.did.redisDownMs, "Redis was restarted").toBeGreaterThan(0);
  expect(report.did.webDownMs, "the web process was restarted").toBeGreaterThan(0);
  expect(report.accepted.length, "jobs accepted (a dislike may be refused by design)").toBeGreaterThanOrEqual(36);
  expect(report.ok, printed).toBe(true);
});

/**
 * The seeds that once failed `npm run test:chaos` (test/chaos/regression-seeds.json), each run
 * again at the default size: 30 imports over 90 s, worker kills, PostgreSQL stopped for 30 s,
 * Redis and the web restarted — every job completed without a person, no row lost or doubled,
 * every row ended as its file said.
 */
for (const seed of regressionSeeds()) {
  test(`regression seed ${seed}: no row lost, none applied twice, none failed that its file did not break`, async () => {
    test.setTimeout(900_000);
    const report = await runChaos({
      ...defaultRun(seed, {
        ports: { web: 3105, sim: 4115, redis: 6395 },
        pgPort: 5495,
        database: "bounded_e2e_chaos_regression",
      }),
      log: () => undefined,
    });
    const printed = formatReport(report);
    console.log(printed);
    expect(report.goals.items.expected, "rows uploaded").toBeGreaterThan(0);
    expect(report.ok, printed).toBe(true);
  });
}
