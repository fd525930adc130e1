/** Formatting shared by server and client components: numbers with units, times people read. */
import { formatAgo } from "@/lib/format/duration";
import { formatCount } from "@/lib/format/number";

export function fmtTime(iso: string | null): string {
  if (!iso) return "—";
  return `${new Date(iso).toISOString().replace("T", " ").slice(0, 19)} UTC`;
}

/** "just now" / "5 min ago" for a timestamp; durations themselves come from `@/lib/format/duration`. */
export function fmtAgo(iso: string, now = Date.now()): string {
  return formatAgo(now - new Date(iso).getTime());
}

/** "1,200 / 5,000": a count out of a total, "?" while the total is not known yet. */
export const fmtOutOf = (n: number, total: number | null) =>
  `${formatCount(n)} / ${total === null ? "?" : formatCount(total)}`;
