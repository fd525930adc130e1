/**
 * `npm run test:chaos [-- --jobs 30 --seconds 90 --seed 7 --seeds 1 --scale 0.01 --workers 2
 * --kill-every 10 --pg-outage 30 --mixed --freeze 0 --plant --regression]`: the chaos run
 * (test/chaos/chaos.ts) of "a dependency briefly down needs no human": imports while a worker
 * process is SIGKILLed every 10 s, PostgreSQL is stopped for 30 s, Redis is restarted and the web
 * process once — against a PostgreSQL (`initdb`, port 5492) and a Redis of its own, so nothing else
 * on the machine is disturbed.
 * - `--seeds N` runs N seeds back to back (`--seed`, then the next ones) and prints one summary.
 * - `--mixed` submits the mixed workload (OCR, agents, syncs, generations) instead of imports only.
 * - `--freeze S` also freezes the simulators (SIGSTOP, then SIGCONT) for S seconds halfway through.
 * - `--pg-outage 0` keeps PostgreSQL up.
 * - `--plant` plants a failure the report must explain (a broken row passed off as good, a written
 *   row deleted): for checking the report, so the run fails.
 * - `--regression` runs the seeds of test/chaos/regression-seeds.json (seeds that once failed).
 * Prints what it did and found (each unexpected row beside the faults around it); exits 1 when a
 * goal is missed. Needs PostgreSQL 15's binaries (/usr/lib/postgresql/15/bin) and `redis-server`.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { formatReport, runChaos, type ChaosReport } from "./chaos";
import { DEFAULT_RUN, regressionSeeds } from "./runs";
import { ensureBuild } from "./system";

const schema = z.object({
  jobs: z.coerce.number().int().min(1).max(1_000),
  seconds: z.coerce.number().min(5).max(3_600),
  seed: z.coerce.number().int().min(0),
  seeds: z.coerce.number().int().min(1).max(1_000),
  scale: z.coerce.number().positive().max(1),
  workers: z.coerce.number().int().min(2).max(8),
  "kill-every": z.coerce.number().min(1).max(600),
  "pg-outage": z.coerce.number().min(0).max(600),
  freeze: z.coerce.number().min(0).max(600),
  mixed: z.boolean(),
  plant: z.boolean(),
  regression: z.boolean(),
});
const usage =
  "usage: npm run test:chaos -- [--jobs 1..1000] [--seconds 5..3600] [--seed N] [--seeds 1..1000] [--scale 0..1] [--workers 2..8] [--kill-every 1..600 s] [--pg-outage 0..600 s] [--freeze 0..600 s] [--mixed] [--plant] [--regression]";
let parsed: z.ZodSafeParseResult<z.infer<typeof schema>>;
try {
  const { values } = parseArgs({
    options: {
      jobs: { type: "string", default: String(DEFAULT_RUN.jobs) },
      seconds: { type: "string", default: String(DEFAULT_RUN.seconds) },
      seed: { type: "string", default: String(Date.now() % 100_000) },
      seeds: { type: "string", default: "1" },
      scale: { type: "string", default: String(DEFAULT_RUN.timeScale) },
      workers: { type: "string", default: String(DEFAULT_RUN.workers) },
      "kill-every": { type: "string", default: String(DEFAULT_RUN.killEveryS) },
      "pg-outage": { type: "string", default: String(DEFAULT_RUN.pgOutageS) },
      freeze: { type: "string", default: "0" },
      mixed: { type: "boolean", default: false },
      plant: { type: "boolean", default: false },
      regression: { type: "boolean", default: false },
    },
  });
  parsed = schema.safeParse(values);
} catch (err) {
  console.error(`test:chaos: ${(err as Error).message}\n${usage}`);
  process.exit(2);
}
if (!parsed.success) {
  console.error(
    `test:chaos: ${parsed.error.issues.map((i) => `--${i.path.join(".")}: ${i.message}`).join("; ")}\n${usage}`,
  );
  process.exit(2);
}
const args = parsed.data;
const seeds = args.regression ? regressionSeeds() : Array.from({ length: args.seeds }, (_, i) => args.seed + i);

ensureBuild();
// Ctrl-C or a kill ends the run through `exit`, whose handlers take its processes down with it.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130));
const reports: ChaosReport[] = [];
for (const seed of seeds) {
  const report = await runChaos({
    jobs: args.jobs,
    seconds: args.seconds,
    seed,
    timeScale: args.scale,
    workers: args.workers,
    killEvery: [args["kill-every"], args["kill-every"]],
    ports: { web: 3192, sim: 4192, redis: 6492 },
    database: "bounded_chaos",
    importsOnly: args.mixed ? undefined : { rows: DEFAULT_RUN.importRows },
    postgres: args["pg-outage"] > 0 ? { port: 5492, outageMs: args["pg-outage"] * 1000 } : undefined,
    freezeSimMs: args.freeze * 1000,
    plant: args.plant,
    noManualAction: true,
  });
  console.log(formatReport(report));
  reports.push(report);
}
if (reports.length > 1) console.log(summary(reports));
process.exit(reports.every((r) => r.ok) ? 0 : 1);

/** One line per seed, then the totals: what several runs found, at a glance. */
function summary(reports: ChaosReport[]): string {
  const line = (r: ChaosReport) =>
    `  seed ${r.options.seed}: ${r.ok ? "passed" : "FAILED"} — ${r.goals.completedWithoutRetry}/${r.goals.accepted} jobs completed without a person; ${r.goals.items.expected} rows, ${r.goals.items.lost} lost, ${r.goals.items.doubled} applied twice; ${r.did.workerKills} worker kills${r.findings.length ? `; ${r.findings.length} rows not as their file said` : ""}${
      r.ok
        ? ""
        : `; failed: ${r.checks
            .filter((c) => !c.ok)
            .map((c) => c.name)
            .join(" | ")}`
    }`;
  const total = (f: (r: ChaosReport) => number) => reports.reduce((s, r) => s + f(r), 0);
  return [
    "",
    `CHAOS SUMMARY ${reports.length} seeds: ${reports.filter((r) => r.ok).length} passed, ${reports.filter((r) => !r.ok).length} failed`,
    ...reports.map(line),
    `  total: ${total((r) => r.goals.completedWithoutRetry)}/${total((r) => r.goals.accepted)} jobs completed without a person; ${total((r) => r.goals.items.expected)} rows, ${total((r) => r.goals.items.lost)} lost, ${total((r) => r.goals.items.doubled)} applied twice; ${total((r) => r.did.workerKills)} worker kills`,
  ].join("\n");
}
