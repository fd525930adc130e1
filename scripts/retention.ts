/**
 * npm run retention -- [--dry-run]
 *
 * One retention pass now (lib/retention/prune.ts), as the workers run it every ten minutes: each
 * class's rows older than its days deleted, and what was removed printed per class and table. With
 * --dry-run nothing is deleted and the same lines say what a pass would remove.
 */
import { parseArgs } from "node:util";
import { closeDb } from "@/lib/db/client";
import { formatCount } from "@/lib/format/number";
import { formatDays } from "@/lib/format/duration";
import { classOf, type PlatformClassName, retentionDays } from "@/lib/retention/policy";
import { pruneOnce, type ClassPruned } from "@/lib/retention/prune";
import { loadDotEnv } from "./preflight";

loadDotEnv(`${import.meta.dirname}/..`);

const usage = `usage: npm run retention -- [--dry-run]
  deletes what is older than each class keeps it (BOUNDED_RETAIN_*_DAYS); --dry-run only counts it`;

/** "job_detail (90 days, before 2026-09-07 12:00 UTC): 1,204 jobs — JobItem 80,112, JobEvent 9,003". */
export function describePruned(p: ClassPruned, dryRun: boolean): string {
  const tables = Object.entries(p.removed)
    .filter(([, n]) => n > 0)
    .map(([table, n]) => `${table} ${formatCount(n)}`);
  const keeps =
    p.cutoff === null
      ? "as each tenant chose"
      : `${formatDays(retentionDays(p.name as PlatformClassName))}, before ${p.cutoff.toISOString().slice(0, 16).replace("T", " ")} UTC`;
  const jobs = p.jobs !== undefined ? `${formatCount(p.jobs)} job(s)${tables.length ? " — " : ""}` : "";
  const what = tables.length || p.jobs ? `${jobs}${tables.join(", ")}` : "nothing";
  const verb = dryRun ? "would remove" : "removed";
  const behind = p.behind ? " (more left: the next pass goes on)" : "";
  return `${p.name} (${keeps}): ${verb} ${what}${behind}`;
}

async function main(): Promise<number> {
  let dryRun: boolean;
  try {
    const { values } = parseArgs({ options: { "dry-run": { type: "boolean", default: false } } });
    dryRun = values["dry-run"] ?? false;
  } catch (err) {
    console.error(`${(err as Error).message}\n${usage}`);
    return 2;
  }
  try {
    // No time limit per class: run by hand, a pass goes to the end.
    const pruned = await pruneOnce({ dryRun, classBudgetMs: Number.POSITIVE_INFINITY });
    for (const p of pruned) console.log(`${describePruned(p, dryRun)}. ${classOf(p.name).holds}.`);
    return 0;
  } finally {
    await closeDb();
  }
}

process.exitCode = await main();
