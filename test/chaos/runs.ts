/**
 * The chaos run at its default size — what `npm run test:chaos` runs without options — and the
 * seeds that once failed it (./regression-seeds.json), which CI runs again (e2e/chaos.spec.ts).
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import type { ChaosOptions } from "./chaos";

export const DEFAULT_RUN = {
  jobs: 30,
  seconds: 90,
  timeScale: 0.01,
  workers: 2,
  killEveryS: 10,
  pgOutageS: 30,
  importRows: [100, 400] as [number, number],
};

/** The options of a default-size run of `seed` (imports only, PostgreSQL stopped once), in its own place. */
export function defaultRun(
  seed: number,
  place: Pick<ChaosOptions, "ports" | "database"> & { pgPort: number },
): ChaosOptions {
  return {
    jobs: DEFAULT_RUN.jobs,
    seconds: DEFAULT_RUN.seconds,
    seed,
    timeScale: DEFAULT_RUN.timeScale,
    workers: DEFAULT_RUN.workers,
    killEvery: [DEFAULT_RUN.killEveryS, DEFAULT_RUN.killEveryS],
    ports: place.ports,
    database: place.database,
    importsOnly: { rows: DEFAULT_RUN.importRows },
    postgres: { port: place.pgPort, outageMs: DEFAULT_RUN.pgOutageS * 1000 },
    noManualAction: true,
  };
}

/** The seeds that once failed, kept in ./regression-seeds.json with what each found. */
export function regressionSeeds(): number[] {
  const file = z.object({ seeds: z.array(z.object({ seed: z.number().int().min(0), found: z.string() })).min(1) });
  return file
    .parse(JSON.parse(readFileSync(new URL("./regression-seeds.json", import.meta.url), "utf8")))
    .seeds.map((s) => s.seed);
}
