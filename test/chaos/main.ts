/**
 * `npm run test:chaos [-- --jobs 30 --seconds 90 --seed 7 --scale 0.01 --workers 2 --kill-every 10
 * --pg-outage 30 --mixed]`: the chaos run (test/chaos/chaos.ts) of "a dependency briefly down
 * needs no human": imports while a worker process is SIGKILLed every 10 s, PostgreSQL is stopped
 * for 30 s, Redis is restarted and the web process once — against a PostgreSQL (`initdb`, port
 * 5492) and a Redis of its own, so nothing else on the machine is disturbed. `--mixed` submits the
 * mixed workload (OCR, agents, syncs, generations) instead of imports only; `--pg-outage 0` keeps
 * PostgreSQL up. Prints what it did and found; exits 1 when a goal is missed.
 * Needs PostgreSQL 15's binaries (/usr/lib/postgresql/15/bin) and `redis-server` on the PATH.
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { formatReport, runChaos } from "./chaos";
import { ensureBuild } from "./system";

const schema = z.object({
  jobs: z.coerce.number().int().min(1).max(1_000),
  seconds: z.coerce.number().min(5).max(3_600),
  seed: z.coerce.number().int().min(0),
  scale: z.coerce.number().positive().max(1),
  workers: z.coerce.number().int().min(2).max(8),
  "kill-every": z.coerce.number().min(1).max(600),
  "pg-outage": z.coerce.number().min(0).max(600),
  mixed: z.boolean(),
});
const usage =
  "usage: npm run test:chaos -- [--jobs 1..1000] [--seconds 5..3600] [--seed N] [--scale 0..1] [--workers 2..8] [--kill-every 1..600 s] [--pg-outage 0..600 s] [--mixed]";
let parsed: z.ZodSafeParseResult<z.infer<typeof schema>>;
try {
  const { values } = parseArgs({
    options: {
      jobs: { type: "string", default: "30" },
      seconds: { type: "string", default: "90" },
      seed: { type: "string", default: String(Date.now() % 100_000) },
      scale: { type: "string", default: "0.01" },
      workers: { type: "string", default: "2" },
      "kill-every": { type: "string", default: "10" },
      "pg-outage": { type: "string", default: "30" },
      mixed: { type: "boolean", default: false },
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

ensureBuild();
const report = await runChaos({
  jobs: args.jobs,
  seconds: args.seconds,
  seed: args.seed,
  timeScale: args.scale,
  workers: args.workers,
  killEvery: [args["kill-every"], args["kill-every"]],
  ports: { web: 3192, sim: 4192, redis: 6492 },
  database: "bounded_chaos",
  importsOnly: args.mixed ? undefined : { rows: [100, 400] },
  postgres: args["pg-outage"] > 0 ? { port: 5492, outageMs: args["pg-outage"] * 1000 } : undefined,
  noManualAction: true,
});
console.log(formatReport(report));
process.exit(report.ok ? 0 : 1);
