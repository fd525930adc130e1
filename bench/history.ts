/**
 * `npm run bench:history` (`npx tsx bench/history.ts [--jobs N] [--calls N] [--passes N]`): a year
 * of history in one figure line. It runs, one after the other and each on its own databases, the
 * three benches that measure it, and sums up their `RESULT` lines:
 * - `bench:dashboard` (`--jobs`, `--calls`, `--passes` passed on): every page's read and the import
 *   start at 100 × the history against 1 × — `max_ratio`, the worst of every pass (goal ≤ 2);
 * - `bench:retention`: the retention pass's rows removed a second (`prune_rows_per_s`) and what an
 *   imported row costs on disk once its job's detail is pruned (`bytes_per_row_after_retention`);
 * - `bench:import -- --only-pruning`: the platform's ceiling with retention passes pruning beside
 *   it, against the same import without (`import_makespan_while_pruning_ratio`, goal ≤ 1.1).
 *
 * Each bench prints its own output as it goes. Ends with `RESULT bench=history max_ratio=…
 * target_max_ratio=2 prune_rows_per_s=… bytes_per_row_after_retention=…
 * import_makespan_while_pruning_ratio=… target_import_makespan_while_pruning_ratio=1.1 ok=…
 * jobs_small=… jobs_large=… calls_small=… calls_large=… passes=… load1_start=… load1=…`. A bench
 * that fails, or prints no `RESULT`, ends this one with its exit code.
 */
import { spawn } from "node:child_process";
import os from "node:os";
import path from "node:path";

const MAX_RATIO_GOAL = 2;
const PRUNING_GOAL = 1.1;

type Figures = Record<string, string>;

/** The `key=value` pairs of a `RESULT` line. */
function figuresOf(line: string): Figures {
  return Object.fromEntries(
    line
      .split(/\s+/)
      .filter((word) => word.includes("="))
      .map((word) => [word.slice(0, word.indexOf("=")), word.slice(word.indexOf("=") + 1)]),
  );
}

/** Runs one bench, its output passed through, and returns the figures of each `RESULT` line it printed. */
function runBench(file: string, args: string[]): Promise<Figures[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, file), ...args], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const results: Figures[] = [];
    let pending = "";
    child.stdout.on("data", (chunk: Buffer) => {
      process.stdout.write(chunk);
      pending += chunk.toString();
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) if (line.startsWith("RESULT ")) results.push(figuresOf(line));
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      if (pending.startsWith("RESULT ")) results.push(figuresOf(pending));
      if (code !== 0) reject(new Error(`${file} exited with ${code}`));
      else if (results.length === 0) reject(new Error(`${file} printed no RESULT line`));
      else resolve(results);
    });
  });
}

/** A figure a bench must have printed. */
function figure(results: Figures[], name: string, bench: string): number {
  const values = results.map((r) => Number(r[name])).filter((v) => Number.isFinite(v));
  if (values.length === 0) throw new Error(`${bench} printed no ${name}`);
  return Math.max(...values);
}

function passedOn(names: string[]): string[] {
  return names.flatMap((name) => {
    const at = process.argv.indexOf(name);
    return at > 0 && process.argv[at + 1] ? [name, process.argv[at + 1]!] : [];
  });
}

async function main(): Promise<void> {
  const loadStart = os.loadavg()[0]!;
  console.log(
    `bench:history — load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" / ")}`,
  );
  const dashboard = await runBench("dashboard.ts", passedOn(["--jobs", "--calls", "--passes"]));
  const retention = await runBench("retention.ts", []);
  const pruning = await runBench("import.ts", ["--only-pruning"]);

  const maxRatio = figure(dashboard, "max_ratio", "bench:dashboard");
  const pruningRatio = figure(pruning, "import_makespan_while_pruning_ratio", "bench:import");
  const first = dashboard[0]!;
  const ok = maxRatio <= MAX_RATIO_GOAL && pruningRatio <= PRUNING_GOAL;
  console.log(
    `RESULT bench=history max_ratio=${maxRatio.toFixed(2)} target_max_ratio=${MAX_RATIO_GOAL} ` +
      `prune_rows_per_s=${figure(retention, "prune_rows_per_s", "bench:retention")} ` +
      `bytes_per_row_after_retention=${figure(retention, "bytes_per_row_after_retention", "bench:retention")} ` +
      `import_makespan_while_pruning_ratio=${pruningRatio.toFixed(2)} target_import_makespan_while_pruning_ratio=${PRUNING_GOAL} ` +
      `ok=${ok} jobs_small=${first.jobs_small} jobs_large=${first.jobs_large} calls_small=${first.calls_small} ` +
      `calls_large=${first.calls_large} passes=${dashboard.length} load1_start=${loadStart.toFixed(1)} load1=${os.loadavg()[0]!.toFixed(1)}`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
