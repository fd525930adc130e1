import { describe, expect, it } from "vitest";
import { parseEnv, type Env } from "@/lib/env";
import { BudgetConfigError, DEFAULT_BUDGET, resolveBudget, validateBudgets, type BudgetCatalog } from "./budgets";
import type { Budget } from "@/lib/catalog/budget";
import { budgetVariable, catalogPairs } from "@/lib/catalog/catalog";
import { formatBudget, formatDuration } from "./format";

/** An environment with nothing set but the given variables (as a process would read them). */
const envWith = (vars: Record<string, string> = {}): Env => parseEnv(vars);

const TASK: Budget = { softMs: 120_000, hardMs: 180_000, why: "task reason" };
const QUEUE: Budget = { softMs: 240_000, hardMs: 360_000, why: "queue reason" };

/** A catalog with every level populated: `both` has a task budget and runs on a queue with one. */
const CATALOG: BudgetCatalog = {
  queues: { imports: { budget: QUEUE }, documents: {} },
  kinds: { both: { budget: TASK }, plain: {} },
};

describe("budget precedence: environment override of the queue > task > queue > default", () => {
  it("with no configuration anywhere, a job gets the global default 600 000 / 900 000 ms with source 'default'", () => {
    const b = resolveBudget("documents", "plain", envWith(), CATALOG);
    expect(b).toEqual({ softMs: 600_000, hardMs: 900_000, why: DEFAULT_BUDGET.why, source: "default" });
  });

  it("a queue declaration beats the default", () => {
    expect(resolveBudget("imports", "plain", envWith(), CATALOG)).toEqual({ ...QUEUE, source: "queue:imports" });
  });

  it("a task declaration beats the queue declaration", () => {
    expect(resolveBudget("imports", "both", envWith(), CATALOG)).toEqual({ ...TASK, source: "task:both" });
  });

  it("without a kind, only the queue and the default count", () => {
    expect(resolveBudget("imports", undefined, envWith(), CATALOG).source).toBe("queue:imports");
    expect(resolveBudget("documents", undefined, envWith(), CATALOG).source).toBe("default");
  });

  it("an environment override beats the task declaration and names both variables as the source", () => {
    const b = resolveBudget(
      "imports",
      "both",
      envWith({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "200000", BOUNDED_BUDGET_IMPORTS_HARD_S: "300000" }),
      CATALOG,
    );
    expect(b.softMs).toBe(200_000_000);
    expect(b.hardMs).toBe(300_000_000);
    expect(b.source).toBe("env:BOUNDED_BUDGET_IMPORTS_SOFT_S,BOUNDED_BUDGET_IMPORTS_HARD_S");
    expect(b.why).toContain("BOUNDED_BUDGET_IMPORTS_SOFT_S=200000");
    expect(b.why).toContain("replaces task:both");
  });

  it("an override of one queue does not touch another queue", () => {
    const e = envWith({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "60", BOUNDED_BUDGET_IMPORTS_HARD_S: "90" });
    expect(resolveBudget("documents", "plain", e, CATALOG).source).toBe("default");
  });

  it("the real catalog: a task budget (sweeps), queue budgets (agent and document queues), the default (imports)", () => {
    const e = envWith();
    expect(resolveBudget("sweeps", "overdue_invoices", e)).toMatchObject({
      softMs: 300_000,
      hardMs: 480_000,
      source: "task:overdue_invoices",
    });
    expect(resolveBudget("agent-interactive", "agent_run", e)).toMatchObject({
      softMs: 60_000,
      hardMs: 90_000,
      source: "queue:agent-interactive",
    });
    expect(resolveBudget("agent-batch", "agent_run", e)).toMatchObject({
      softMs: 1_800_000,
      hardMs: 2_400_000,
      source: "queue:agent-batch",
    });
    expect(resolveBudget("documents", "bulk_ocr", e)).toMatchObject({
      softMs: 1_800_000,
      hardMs: 2_400_000,
      source: "queue:documents",
    });
    expect(resolveBudget("imports", "csv_import", e)).toMatchObject({
      softMs: 600_000,
      hardMs: 900_000,
      source: "default",
    });
  });

  it("every budget declared in code says why", () => {
    for (const { queue, kind } of catalogPairs())
      expect(resolveBudget(queue, kind, envWith()).why.length).toBeGreaterThan(20);
  });
});

describe("partial overrides combine with the next level down", () => {
  it("only the soft variable: hard comes from the level below, the source names the variable, the why says so", () => {
    const b = resolveBudget("imports", "both", envWith({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "150" }), CATALOG);
    expect(b).toMatchObject({ softMs: 150_000, hardMs: TASK.hardMs, source: "env:BOUNDED_BUDGET_IMPORTS_SOFT_S" });
    expect(b.why).toContain("partial override");
    expect(b.why).toContain("from task:both because BOUNDED_BUDGET_IMPORTS_HARD_S is not set");
  });

  it("only the hard variable: soft comes from the level below", () => {
    const b = resolveBudget("sweeps", "overdue_invoices", envWith({ BOUNDED_BUDGET_SWEEPS_HARD_S: "600" }));
    expect(b).toMatchObject({ softMs: 300_000, hardMs: 600_000, source: "env:BOUNDED_BUDGET_SWEEPS_HARD_S" });
    expect(b.why).toContain(
      "soft limit 5 min from task:overdue_invoices because BOUNDED_BUDGET_SWEEPS_SOFT_S is not set",
    );
  });

  it("over the default when nothing is declared", () => {
    const b = resolveBudget("imports", "csv_import", envWith({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "300" }));
    expect(b).toMatchObject({ softMs: 300_000, hardMs: 900_000, source: "env:BOUNDED_BUDGET_IMPORTS_SOFT_S" });
    expect(b.why).toContain("from default");
  });
});

describe("validation: hard > soft > 0 for every (queue, kind), one line naming the variables and the numbers", () => {
  const messageOf = (fn: () => void): string => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(BudgetConfigError);
      return (err as Error).message;
    }
    throw new Error("expected a BudgetConfigError");
  };

  it("the shipped catalog with no overrides is valid", () => {
    expect(() => validateBudgets(envWith())).not.toThrow();
  });

  it("hard below soft, both from the environment", () => {
    const m = messageOf(() =>
      validateBudgets(envWith({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "1000", BOUNDED_BUDGET_IMPORTS_HARD_S: "500" })),
    );
    expect(m).toContain("BOUNDED_BUDGET_IMPORTS_HARD_S=500 must be greater than BOUNDED_BUDGET_IMPORTS_SOFT_S=1000");
    expect(m).toContain("imports/csv_import");
    expect(m).not.toContain("\n");
  });

  it("hard equal to soft is refused too", () => {
    const m = messageOf(() =>
      validateBudgets(envWith({ BOUNDED_BUDGET_DOCUMENTS_SOFT_S: "300", BOUNDED_BUDGET_DOCUMENTS_HARD_S: "300" })),
    );
    expect(m).toContain("BOUNDED_BUDGET_DOCUMENTS_HARD_S=300 must be greater than BOUNDED_BUDGET_DOCUMENTS_SOFT_S=300");
  });

  it("a partial soft override above the inherited hard limit names the variable, the inherited number and its source", () => {
    const m = messageOf(() => validateBudgets(envWith({ BOUNDED_BUDGET_IMPORTS_SOFT_S: "1000" })));
    expect(m).toContain(
      "BOUNDED_BUDGET_IMPORTS_SOFT_S=1000 for imports/csv_import is not below the hard limit 900 s it keeps from default",
    );
    expect(m).toContain("set BOUNDED_BUDGET_IMPORTS_HARD_S above 1000");
  });

  it("a partial hard override below the inherited soft limit", () => {
    const m = messageOf(() => validateBudgets(envWith({ BOUNDED_BUDGET_AGENT_INTERACTIVE_HARD_S: "30" })));
    expect(m).toContain(
      "BOUNDED_BUDGET_AGENT_INTERACTIVE_HARD_S=30 for agent-interactive/agent_run is not above the soft limit 60 s it keeps from queue:agent-interactive",
    );
  });

  it("several problems are reported together, still on one line", () => {
    const m = messageOf(() =>
      validateBudgets(
        envWith({
          BOUNDED_BUDGET_IMPORTS_SOFT_S: "10",
          BOUNDED_BUDGET_IMPORTS_HARD_S: "5",
          BOUNDED_BUDGET_SWEEPS_HARD_S: "60",
        }),
      ),
    );
    expect(m).toMatch(/^Invalid budgets, refusing to start: /);
    expect(m).toContain("BOUNDED_BUDGET_IMPORTS_HARD_S=5");
    expect(m).toContain("BOUNDED_BUDGET_SWEEPS_HARD_S=60");
    expect(m).not.toContain("\n");
  });

  it("resolveBudget refuses an invalid resolution, so no job is created with it", () => {
    const m = messageOf(() => resolveBudget("imports", "csv_import", envWith({ BOUNDED_BUDGET_IMPORTS_HARD_S: "1" })));
    expect(m).toContain("BOUNDED_BUDGET_IMPORTS_HARD_S=1");
  });

  it("a budget declared in code with hard ≤ soft is reported with its source", () => {
    const broken: BudgetCatalog = {
      queues: { imports: {} },
      kinds: { bad: { budget: { softMs: 60_000, hardMs: 60_000, why: "oops" } } },
    };
    const m = messageOf(() => resolveBudget("imports", "bad", envWith(), broken));
    expect(m).toContain("imports/bad from task:bad needs hard > soft > 0 but has soft 60 s and hard 60 s");
  });
});

describe("names and units", () => {
  it("the variable of a queue: upper case, '-' → '_'", () => {
    expect(budgetVariable("marketplace-sync", "SOFT")).toBe("BOUNDED_BUDGET_MARKETPLACE_SYNC_SOFT_S");
    expect(budgetVariable("imports", "HARD")).toBe("BOUNDED_BUDGET_IMPORTS_HARD_S");
  });

  it("durations read as people say them", () => {
    expect(formatBudget(DEFAULT_BUDGET)).toBe("10 min / 15 min");
    expect(formatDuration(60_000)).toBe("1 min");
    expect(formatDuration(90_000)).toBe("90 s");
    expect(formatDuration(480_000)).toBe("8 min");
    expect(formatDuration(3_600_000)).toBe("1 h");
    expect(formatDuration(5_400_000)).toBe("1 h 30 min");
    expect(formatDuration(300_000_000)).toBe("83 h 20 min");
    expect(formatDuration(200_000_000)).toBe("≈55 h 33 min");
    expect(formatDuration(300)).toBe("300 ms");
    expect(formatDuration(2_500)).toBe("2.5 s");
  });
});
