/**
 * `npm run test:chaos [-- --jobs 240 --seconds 120 --seed 7 --scale 0.01 --workers 2]`: the full
 * chaos run (test/chaos/chaos.ts). Prints what it did and found; exits 1 when a check fails.
 * Needs PostgreSQL on 127.0.0.1:5432 and `redis-server` on the PATH (it runs a Redis of its own).
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
});
const usage = "usage: npm run test:chaos -- [--jobs 1..1000] [--seconds 5..3600] [--seed N] [--scale 0..1] [--workers 2..8]";
let parsed: z.ZodSafeParseResult<z.infer<typeof schema>>;
try {
  const { values } = parseArgs({
    options: {
      jobs: { type: "string", default: "240" },
      seconds: { type: "string", default: "120" },
      seed: { type: "string", default: String(Date.now() % 100_000) },
      scale: { type: "string", default: "0.01" },
      workers: { type: "string", default: "2" },
    },
  });
  parsed = schema.safeParse(values);
} catch (err) {
  console.error(`test:chaos: ${(err as Error).message}\n${usage}`);
  process.exit(2);
}
if (!parsed.success) {
  console.error(`test:chaos: ${parsed.error.issues.map((i) => `--${i.path.join(".")}: ${i.message}`).join("; ")}\n${usage}`);
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
  killEvery: [2, 6],
  ports: { web: 3102, sim: 4112, redis: 6392 },
  database: "bounded_chaos",
});
console.log(formatReport(report));
process.exit(report.ok ? 0 : 1);
