import { env, type Env } from "@/lib/env";
import { budgetVariable, catalogPairs, KINDS, QUEUES, type JobKind, type QueueName } from "@/lib/catalog/catalog";
import type { Budget } from "@/lib/catalog/budget";
import { formatDuration } from "./format";

export interface ResolvedBudget extends Budget {
  /**
   * Where the budget came from: `env:<VARIABLE>[,<VARIABLE>]`, `task:<kind>`, `queue:<name>` or
   * `default`. A partial override (one variable) names only that variable; `why` says where the
   * other limit came from.
   */
  source: string;
}

/** Nobody set anything: ten minutes to finish, five more before the runtime stops the run. */
export const DEFAULT_BUDGET: Budget = {
  softMs: 600_000,
  hardMs: 900_000,
  why: "global default: long enough for a typical batch, short enough that a stuck job is noticed within a shift",
};

/** A budget that cannot work (hard not above soft, or not positive), said in one line. */
export class BudgetConfigError extends Error {
  override name = "BudgetConfigError";
}

/** The pairs a worker consuming `queues` runs. */
export function pairsOfQueues(queues: readonly string[]): { queue: QueueName; kind: JobKind }[] {
  return catalogPairs().filter((p) => queues.includes(p.queue));
}

/**
 * The budgets declared in code: per queue and per job kind. The real one is lib/catalog/catalog.ts;
 * tests pass their own to exercise every level of the precedence.
 */
export interface BudgetCatalog {
  queues: Readonly<Record<string, { readonly budget?: Budget; readonly policy?: string }>>;
  kinds: Readonly<Record<string, { readonly budget?: Budget; readonly queues?: readonly string[] }>>;
}

export const CATALOG: BudgetCatalog = { queues: QUEUES, kinds: KINDS };

/** The budget declared in code for this pair, without the environment: task > queue > default. */
export function declaredBudget(queue: string, kind?: string, catalog: BudgetCatalog = CATALOG): ResolvedBudget {
  const task = kind !== undefined && Object.hasOwn(catalog.kinds, kind) ? catalog.kinds[kind]!.budget : undefined;
  if (task) return { ...task, source: `task:${kind}` };
  const declared = Object.hasOwn(catalog.queues, queue) ? catalog.queues[queue]!.budget : undefined;
  if (declared) return { ...declared, source: `queue:${queue}` };
  return { ...DEFAULT_BUDGET, source: "default" };
}

function overrideSeconds(source: Env, variable: string): number | undefined {
  const value = (source as Record<string, unknown>)[variable];
  return typeof value === "number" ? value : undefined;
}

/**
 * The budget without the validity check: environment override of the queue > task declaration
 * (`KINDS[kind].budget`) > queue declaration (`QUEUES[queue].budget`) > global default. A
 * partial override (only the soft or only the hard variable) takes the other limit from the
 * next level down, and `why` says so.
 */
export function resolveBudgetUnchecked(
  queue: string,
  kind?: string,
  source: Env = env(),
  catalog: BudgetCatalog = CATALOG,
): ResolvedBudget {
  const softVar = budgetVariable(queue, "SOFT");
  const hardVar = budgetVariable(queue, "HARD");
  const soft = overrideSeconds(source, softVar);
  const hard = overrideSeconds(source, hardVar);
  const below = declaredBudget(queue, kind, catalog);
  if (soft === undefined && hard === undefined) return below;

  const softMs = soft !== undefined ? Math.round(soft * 1000) : below.softMs;
  const hardMs = hard !== undefined ? Math.round(hard * 1000) : below.hardMs;
  const replaced = `replaces ${below.source} (${formatDuration(below.softMs)} / ${formatDuration(below.hardMs)}: ${below.why})`;
  if (soft !== undefined && hard !== undefined) {
    return {
      softMs,
      hardMs,
      source: `env:${softVar},${hardVar}`,
      why: `override in this process's environment: ${softVar}=${soft} and ${hardVar}=${hard}; ${replaced}`,
    };
  }
  const [setVar, setValue, setLimit, otherLimit, otherVar, otherMs] =
    soft !== undefined
      ? [softVar, soft, "soft", "hard", hardVar, below.hardMs]
      : [hardVar, hard!, "hard", "soft", softVar, below.softMs];
  return {
    softMs,
    hardMs,
    source: `env:${setVar}`,
    why:
      `partial override: ${setLimit} limit from ${setVar}=${setValue}; ${otherLimit} limit ${formatDuration(otherMs)} from ` +
      `${below.source} because ${otherVar} is not set (${below.source}: ${below.why})`,
  };
}

/**
 * What is wrong with a resolved budget, in one line naming the variable(s) and the numbers, or
 * null when `hard > soft > 0`.
 */
export function budgetProblem(
  queue: string,
  kind: string | undefined,
  budget: ResolvedBudget,
  catalog: BudgetCatalog = CATALOG,
): string | null {
  if (budget.softMs > 0 && budget.hardMs > budget.softMs) return null;
  const where = `${queue}${kind ? `/${kind}` : ""}`;
  const softVar = budgetVariable(queue, "SOFT");
  const hardVar = budgetVariable(queue, "HARD");
  const s = (ms: number) => `${ms / 1000} s`;
  if (!budget.source.startsWith("env:")) {
    // Declared in code (lib/catalog/catalog.ts) or the default: the catalog itself is wrong.
    return `budget of ${where} from ${budget.source} needs hard > soft > 0 but has soft ${s(budget.softMs)} and hard ${s(budget.hardMs)} (fix lib/catalog/catalog.ts or set ${softVar} and ${hardVar})`;
  }
  const vars = budget.source.slice("env:".length).split(",");
  if (budget.softMs <= 0) return `${softVar}=${budget.softMs / 1000} for ${where}: the soft limit must be above 0`;
  if (vars.length === 2) {
    return `${hardVar}=${budget.hardMs / 1000} must be greater than ${softVar}=${budget.softMs / 1000} for ${where} (hard ${s(budget.hardMs)} is not above soft ${s(budget.softMs)})`;
  }
  const below = declaredBudget(queue, kind, catalog);
  if (vars[0] === softVar) {
    return `${softVar}=${budget.softMs / 1000} for ${where} is not below the hard limit ${s(budget.hardMs)} it keeps from ${below.source}; set ${hardVar} above ${budget.softMs / 1000} too, or lower ${softVar}`;
  }
  return `${hardVar}=${budget.hardMs / 1000} for ${where} is not above the soft limit ${s(budget.softMs)} it keeps from ${below.source}; set ${softVar} below ${budget.hardMs / 1000} too, or raise ${hardVar}`;
}

/**
 * The budget a job of `kind` on `queue` runs under, with its source and reason. Throws a
 * `BudgetConfigError` when the resolution cannot work, so no job is ever created with it.
 */
export function resolveBudget(
  queue: string,
  kind?: string,
  source: Env = env(),
  catalog: BudgetCatalog = CATALOG,
): ResolvedBudget {
  const budget = resolveBudgetUnchecked(queue, kind, source, catalog);
  const problem = budgetProblem(queue, kind, budget, catalog);
  if (problem) throw new BudgetConfigError(`Invalid budget: ${problem}.`);
  return budget;
}

/** Every problem of the catalog's budgets under this environment (deduplicated, catalog order). */
export function budgetProblems(source: Env = env()): string[] {
  const problems = new Set<string>();
  for (const { queue, kind } of catalogPairs()) {
    const problem = budgetProblem(queue, kind, resolveBudgetUnchecked(queue, kind, source));
    if (problem) problems.add(problem);
  }
  return [...problems];
}

/**
 * Checks every (queue, kind) of the catalog: `hard > soft > 0`. Workers call this at start-up
 * and refuse to start on the one-line error, which names the variable(s) and the numbers.
 */
export function validateBudgets(source: Env = env()): void {
  const problems = budgetProblems(source);
  if (problems.length > 0) throw new BudgetConfigError(`Invalid budgets, refusing to start: ${problems.join("; ")}.`);
}
