import { formatCount } from "@/lib/format/number";

/** Labels shared by the model-calls page and its chart; durations come from `@/lib/format/duration`. */

/** The axis labels of the latency chart: round values people reason in. */
export const AXIS_TICKS_MS: { ms: number; label: string }[] = [
  { ms: 10, label: "10 ms" },
  { ms: 100, label: "100 ms" },
  { ms: 1_000, label: "1 s" },
  { ms: 10_000, label: "10 s" },
  { ms: 60_000, label: "1 min" },
  { ms: 600_000, label: "10 min" },
  { ms: 3_600_000, label: "1 h" },
  // Reached when the time scale is small: the recorded buckets then span production days.
  { ms: 86_400_000, label: "1 d" },
];

export const RANGE_LABEL = { "1h": "1 h", "24h": "24 h", "7d": "7 d", "30d": "30 d" } as const;

/** A token count with its unit: "12,400 tokens". */
export function formatTokens(n: number): string {
  return `${formatCount(n)} ${n === 1 ? "token" : "tokens"}`;
}
