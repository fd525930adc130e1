/**
 * `npm run bench:failover` (`npx tsx bench/failover.ts [--scale s] [--rows n]`): an import that
 * finishes on time while its model provider cannot, by failing over to a second one.
 *
 * The simulators' two model providers (lib/model-providers.ts): the primary (32 calls in flight,
 * 30 requests a second) and a backup with half its capacity (16, 15) at twice its price. One
 * worker process (a BullMQ Worker on `imports` in this process, as workers/main.ts starts it),
 * three imports of the same 2,000 rows, each for a tenant of its own (no stored answer is shared),
 * at the default import budget (600 s):
 *
 * 1. **unfrozen**, route `primary,backup`: the makespan M0 every other run is measured against,
 *    and the cost of answering every row on the primary;
 * 2. **frozen, with the fallback**: the primary silent (calls accepted, none answered, the calls
 *    held then lost) from 20 % to 80 % of M0 after the import was created;
 * 3. **frozen, without it**: the same silence, route `primary` alone: the import waits and fails
 *    nothing.
 *
 * `RESULT bench=failover within_budget=… rows_failed=… double_paid_rows=… rows_by_fallback=…
 * makespan_vs_unfrozen=… cost_vs_all_primary=… no_fallback_makespan_s=… no_fallback_status=…`.
 * Goals: within budget, no row failed or paid twice (Σ rows of the answered calls ≤ rows answered
 * by the model), rows answered by the fallback, `makespan_vs_unfrozen` ≤ 1.5. A missed goal is
 * printed as missed; the exit code is 1 only when the run itself broke. Its own database
 * (`bounded_bench_failover`) and Redis prefix, removed at the end; its own simulator port.
 */
import net from "node:net";
import os from "node:os";
// Relative imports: tsx maps "@/…" only from the repository root; these work from anywhere.
import {
  benchDatabaseUrl,
  benchRedisPrefix,
  csvOf,
  flagNumber,
  startImportsWorker,
  untilJobEnds,
  withinCap,
} from "./common";
import { dropDatabase, migrate } from "../scripts/db/migrate";

const SCALE = flagNumber("--scale") ?? 0.1;
const ROWS = flagNumber("--rows") ?? 2_000;
const SILENT_FROM = 0.2;
const SILENT_TO = 0.8;
const GOAL_MAKESPAN = 1.5;
/** Production seconds a run may take before the bench gives up: the budget's hard limit and then some. */
const CAP_S = 1_800;
const PRIMARY_MODEL = "bounded-sim-1";
const BACKUP_MODEL = "bounded-sim-backup-1";
const PRICES = {
  [PRIMARY_MODEL]: { prompt: 0.15, completion: 0.6 },
  [BACKUP_MODEL]: { prompt: 0.3, completion: 1.2 },
};
const benchUrl = benchDatabaseUrl("bounded_bench_failover");

/** A free TCP port for the simulators, so the environment names it before anything reads it. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface Run {
  label: string;
  status: string;
  processed: number;
  failed: number;
  makespanS: number;
  softS: number;
  byModel: Map<string, number>;
  /** Σ rows of the calls that answered, all providers. */
  rowsAsked: number;
  costUsd: number;
}

async function main(): Promise<void> {
  const benchStarted = performance.now();
  const prefix = benchRedisPrefix("failover");
  const port = await freePort();
  await dropDatabase(benchUrl);
  await migrate(benchUrl);
  Object.assign(process.env, {
    DATABASE_URL: benchUrl,
    BOUNDED_REDIS_PREFIX: prefix,
    BOUNDED_TIME_SCALE: String(SCALE),
    BOUNDED_SIM_PORT: String(port),
    MODEL_BASE_URL: `http://127.0.0.1:${port}/v1`,
    MODEL_NAME: PRIMARY_MODEL,
    LOG_LEVEL: "silent",
    BOUNDED_SIM_MODEL_ERROR_RATE: "0",
    BOUNDED_SIM_BACKUP_MODEL_ERROR_RATE: "0",
    BOUNDED_SIM_BACKUP_MODEL_CONCURRENCY: "16",
    BOUNDED_SIM_BACKUP_MODEL_RPS: "15",
    BOUNDED_MODEL_PROVIDERS: "backup",
    MODEL_BACKUP_BASE_URL: `http://127.0.0.1:${port}/backup/v1`,
    MODEL_BACKUP_NAME: BACKUP_MODEL,
    BOUNDED_PROVIDER_MODEL_BACKUP_CONCURRENCY: "16",
    BOUNDED_PROVIDER_MODEL_BACKUP_RPS: "15",
    BOUNDED_MODEL_PRICES: JSON.stringify(PRICES),
    BOUNDED_MODEL_ROUTE: "primary,backup",
    // Measured on direct calls: with room in its budget an import would take the batch lane.
    BOUNDED_BATCH_LANE_KINDS: "none",
  });
  for (const v of ["BOUNDED_BUDGET_IMPORTS_SOFT_S", "BOUNDED_BUDGET_IMPORTS_HARD_S", "BOUNDED_SIM_SILENT"])
    delete process.env[v];
  const { db, closeDb } = await import("../lib/db/client");
  const { createRedis, closeRedis, scanKeys } = await import("../lib/redis/client");
  const { createImport } = await import("../lib/imports/create-import");
  const { resetModelRouting } = await import("../lib/model-providers");
  const { estimateCostUsd } = await import("../lib/modelcalls/usage");
  const { startSimulators } = await import("../workers/simulators/server");
  const sim = await startSimulators({ port });
  const worker = await startImportsWorker();
  const bytes = csvOf(ROWS);

  /** One import; with `silentFor`, the primary silent over that window of production s after it was created. */
  const run = async (label: string, silentFor?: { fromS: number; toS: number }): Promise<Run> => {
    const created = await createImport({ tenant: `bench-failover-${label}`, filename: `${label}.csv`, bytes });
    if (created.type !== "created") throw new Error(`the import was refused: ${created.message}`);
    const { jobId } = created;
    const timers = silentFor
      ? [
          setTimeout(() => sim.faults.setSilent("model", true), silentFor.fromS * 1000 * SCALE),
          setTimeout(() => sim.faults.setSilent("model", false), silentFor.toS * 1000 * SCALE),
        ]
      : [];
    try {
      await withinCap(untilJobEnds(jobId, 100), CAP_S * 1000 * SCALE, `the ${label} import`);
    } finally {
      for (const t of timers) clearTimeout(t);
      sim.faults.setSilent("model", false);
    }
    const job = await db().job.findUniqueOrThrow({
      where: { id: jobId },
      select: { status: true, processed: true, failed: true, createdAt: true, finishedAt: true, budgetSoftMs: true },
    });
    const byModel = await db().$queryRaw<{ model: string; rows: number }[]>`
      SELECT model, count(*)::int AS rows FROM "CategoryAnswerUse" WHERE "jobId" = ${jobId}::uuid GROUP BY 1`;
    const calls = await db().$queryRaw<{ model: string; rows: number; prompt: number; completion: number }[]>`
      SELECT model, coalesce(sum("batchSize"), 0)::int AS rows, coalesce(sum("promptTokens"), 0)::float8 AS prompt,
             coalesce(sum("completionTokens"), 0)::float8 AS completion
      FROM "ModelCall" WHERE "jobId" = ${jobId}::uuid AND type = 'model' AND outcome = 'ok' GROUP BY 1`;
    return {
      label,
      status: job.status,
      processed: job.processed,
      failed: job.failed,
      makespanS: ((job.finishedAt?.getTime() ?? Date.now()) - job.createdAt.getTime()) / SCALE / 1000,
      softS: job.budgetSoftMs / 1000,
      byModel: new Map(byModel.map((r) => [r.model, r.rows])),
      rowsAsked: calls.reduce((sum, c) => sum + c.rows, 0),
      costUsd: calls.reduce((sum, c) => sum + (estimateCostUsd(c.model, c.prompt, c.completion, PRICES) ?? 0), 0),
    };
  };

  const unfrozen = await run("unfrozen");
  const window = { fromS: SILENT_FROM * unfrozen.makespanS, toS: SILENT_TO * unfrozen.makespanS };
  const frozen = await run("frozen", window);
  process.env.BOUNDED_MODEL_ROUTE = "primary";
  resetModelRouting();
  const alone = await run("no-fallback", window);

  await worker.close();
  await sim.close();
  const cleanup = createRedis("producer", { enableOfflineQueue: true });
  for await (const keys of scanKeys(cleanup, `${prefix}:*`, 1_000)) if (keys.length) await cleanup.del(...keys);
  await cleanup.quit();
  await closeRedis();
  await closeDb();
  await dropDatabase(benchUrl);

  const f1 = (n: number) => n.toFixed(1);
  const f2 = (n: number) => n.toFixed(2);
  const answered = (r: Run) => [...r.byModel.values()].reduce((a, b) => a + b, 0);
  const doublePaid = Math.max(0, frozen.rowsAsked - answered(frozen));
  const byFallback = frozen.byModel.get(BACKUP_MODEL) ?? 0;
  const vsUnfrozen = frozen.makespanS / unfrozen.makespanS;
  const costRatio = unfrozen.costUsd === 0 ? 0 : frozen.costUsd / unfrozen.costUsd;
  const withinBudget = frozen.status === "completed" && frozen.makespanS <= frozen.softS;
  const describe = (r: Run) =>
    `${r.label}: ${r.status}, ${r.processed} processed, ${r.failed} failed, ${f1(r.makespanS)} s (budget ${f1(r.softS)} s); rows by model: ${[...r.byModel].map(([m, n]) => `${m} ${n}`).join(", ") || "none"}; rows in answered calls ${r.rowsAsked}; cost $${r.costUsd.toFixed(4)}`;

  console.log(
    `bench:failover — time scale ${SCALE} (production seconds = real ÷ ${SCALE}); ${ROWS} rows; the primary (32 in flight, 30/s, $0.15/$0.60 per M tokens) and a backup (16, 15/s, twice the price); one worker process`,
  );
  console.log(
    `silence: the primary from ${f1(window.fromS)} s to ${f1(window.toS)} s after each frozen import was created (${SILENT_FROM * 100} % to ${SILENT_TO * 100} % of the unfrozen makespan)`,
  );
  for (const r of [unfrozen, frozen, alone]) console.log(describe(r));
  console.log(`makespan_vs_unfrozen = ${f1(frozen.makespanS)} s ÷ ${f1(unfrozen.makespanS)} s = ${f2(vsUnfrozen)}`);
  console.log(
    `double_paid_rows = rows in answered calls − rows answered by the model = ${frozen.rowsAsked} − ${answered(frozen)} = ${doublePaid}`,
  );
  if (!withinBudget) console.log("goal missed: the frozen import did not complete within its budget");
  if (frozen.failed > 0 || alone.failed > 0) console.log("goal missed: rows failed");
  if (doublePaid > 0) console.log(`goal missed: ${doublePaid} rows paid for twice`);
  if (byFallback === 0) console.log("goal missed: no row was answered by the fallback");
  if (vsUnfrozen > GOAL_MAKESPAN)
    console.log(`goal missed: makespan ${f2(vsUnfrozen)} × the unfrozen one (goal ≤ ${GOAL_MAKESPAN})`);
  console.log(
    `machine: ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")}; bench took ${Math.round((performance.now() - benchStarted) / 1000)} s`,
  );
  console.log(
    `RESULT bench=failover rows=${ROWS} within_budget=${withinBudget} rows_failed=${frozen.failed} double_paid_rows=${doublePaid} rows_by_fallback=${byFallback} makespan_vs_unfrozen=${f2(vsUnfrozen)} target_makespan_vs_unfrozen=${GOAL_MAKESPAN} unfrozen_makespan_s=${f1(unfrozen.makespanS)} frozen_makespan_s=${f1(frozen.makespanS)} cost_vs_all_primary=${f2(costRatio)} no_fallback_makespan_s=${f1(alone.makespanS)} no_fallback_status=${alone.status} no_fallback_rows_failed=${alone.failed} load1=${os.loadavg()[0]!.toFixed(1)}`,
  );
}

main().then(
  () => process.exit(0),
  async (err: unknown) => {
    console.error(`FAIL bench=failover: ${err instanceof Error ? err.message : String(err)}`);
    await dropDatabase(benchUrl).catch(() => undefined);
    process.exit(1);
  },
);
