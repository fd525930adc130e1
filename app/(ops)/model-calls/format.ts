/** Durations as on-call engineers read them, shared by the page and its chart. */

/** 740 ms, 5.4 s, 35 s, 11 min, 1.5 h: two significant digits where it matters, units always. */
export function fmtMs(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 10_000) return `${trim((ms / 1_000).toFixed(1))} s`;
  if (ms < 90_000) return `${Math.round(ms / 1_000)} s`;
  if (ms < 90 * 60_000) return `${ms < 600_000 ? trim((ms / 60_000).toFixed(1)) : Math.round(ms / 60_000)} min`;
  return `${trim((ms / 3_600_000).toFixed(1))} h`;
}

const trim = (s: string) => s.replace(/\.0$/, "");

/** The axis labels of the latency chart: round values people reason in. */
export const AXIS_TICKS_MS: { ms: number; label: string }[] = [
  { ms: 10, label: "10 ms" },
  { ms: 100, label: "100 ms" },
  { ms: 1_000, label: "1 s" },
  { ms: 10_000, label: "10 s" },
  { ms: 60_000, label: "1 min" },
  { ms: 600_000, label: "10 min" },
  { ms: 3_600_000, label: "1 h" },
];

export const RANGE_LABEL = { "1h": "1 h", "24h": "24 h", "7d": "7 d", "30d": "30 d" } as const;
