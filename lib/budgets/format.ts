/**
 * Durations as an on-call engineer reads them. Exact where the number is round ("10 min",
 * "90 s", "1 h 30 min"); two units at most, marked "≈" when a smaller remainder was dropped.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return "—";
  if (ms < 0) return `-${formatDuration(-ms)}`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10_000 && ms % 1000 !== 0) return `${(ms / 1000).toFixed(1)} s`;
  const totalS = Math.round(ms / 1000);
  // 60 s and 120 s read better as minutes; 90 s reads better as 90 s than as "1 min 30 s".
  if (totalS < 120 && totalS % 60 !== 0) return `${totalS} s`;
  // No days: "55 h" compares with "15 min" at a glance, "2 d 7 h" makes the reader convert.
  const units: [string, number][] = [
    ["h", 3_600],
    ["min", 60],
    ["s", 1],
  ];
  const parts: string[] = [];
  let rest = totalS;
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    if (n > 0 && parts.length < 2) {
      parts.push(`${n} ${name}`);
      rest -= n * size;
    } else if (parts.length > 0 && parts.length < 2) {
      // A zero unit after the first one still counts toward "two units at most".
      parts.push("");
    }
  }
  const shown = parts.filter(Boolean).join(" ");
  return rest > 0 || ms % 1000 !== 0 ? `≈${shown}` : shown;
}

/** "10 min / 15 min": soft / hard. */
export function formatBudget(budget: { softMs: number; hardMs: number }): string {
  return `${formatDuration(budget.softMs)} / ${formatDuration(budget.hardMs)}`;
}
