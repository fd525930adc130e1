import { formatDuration } from "@/lib/format/duration";

/** Kept so `import { formatDuration } from "@/lib/budgets/format"` still reaches the one formatter. */
export { formatDuration };

/** "10 min / 15 min": soft / hard. */
export function formatBudget(budget: { softMs: number; hardMs: number }): string {
  return `${formatDuration(budget.softMs)} / ${formatDuration(budget.hardMs)}`;
}
