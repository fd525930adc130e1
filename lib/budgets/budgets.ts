import { env, type Env } from "@/lib/env";

/** How long a job may run: the soft limit ends it cleanly, the hard limit stops it. */
export interface Budget {
  softMs: number;
  hardMs: number;
  /** Why this number: written next to it so nobody inherits a budget nobody chose. */
  why: string;
}

export interface ResolvedBudget extends Budget {
  /** Where the budget came from: `env:<VARIABLE>`, `queue:<name>` or `default`. */
  source: string;
}

/** Nobody set anything: ten minutes to finish, five more before the runtime stops the run. */
export const DEFAULT_BUDGET: Budget = {
  softMs: 600_000,
  hardMs: 900_000,
  why: "global default: long enough for a typical batch, short enough that a stuck job is noticed within a shift",
};

/** `marketplace-sync` → `MARKETPLACE_SYNC`, as in BOUNDED_BUDGET_<QUEUE>_SOFT_S. */
export function budgetVariable(queue: string, limit: "SOFT" | "HARD"): string {
  return `BOUNDED_BUDGET_${queue.toUpperCase().replaceAll("-", "_")}_${limit}_S`;
}

/** The budget of a queue: an override through the environment, else the global default. */
export function resolveBudget(queue: string, source: Env = env()): ResolvedBudget {
  const soft = source[budgetVariable(queue, "SOFT") as keyof Env] as number | undefined;
  const hard = source[budgetVariable(queue, "HARD") as keyof Env] as number | undefined;
  if (soft === undefined && hard === undefined) return { ...DEFAULT_BUDGET, source: "default" };
  const softMs = soft !== undefined ? soft * 1000 : DEFAULT_BUDGET.softMs;
  const hardMs = hard !== undefined ? hard * 1000 : Math.max(DEFAULT_BUDGET.hardMs, softMs * 1.5);
  const variables = [soft !== undefined && budgetVariable(queue, "SOFT"), hard !== undefined && budgetVariable(queue, "HARD")].filter(Boolean);
  if (!(hardMs > softMs)) {
    throw new Error(`${budgetVariable(queue, "HARD")} must be greater than ${budgetVariable(queue, "SOFT")} (soft ${softMs / 1000} s, hard ${hardMs / 1000} s).`);
  }
  return { softMs, hardMs, why: `set by ${variables.join(" and ")}`, source: `env:${variables.join(",")}` };
}
