import { formatCount } from "./number";

/**
 * Durations as people read them — the one formatter for pages, messages, logs and workers.
 *
 * Pure on purpose (nothing outside lib/format, no environment): client components, server code and worker
 * threads render the same number the same way, so a limit never reads "90 s" on one page and
 * "2 min" on another. Every function takes milliseconds.
 *
 * - {@link formatDuration} — the human form: "450 ms", "2.5 s", "90 s", "1 min", "1 h 5 min";
 *   marked "≈" when a unit had to be dropped ("≈55 h 33 min").
 * - {@link formatDurationRounded} — the same text without the marker, for a sentence that already
 *   says it is approximate in words ("about 5 min left") or a measured age.
 * - {@link formatEstimate} — an estimate, always marked: "≈ 9 min" (a projection, a percentile
 *   read from histogram buckets, a drain time). The "≈" is written by this module only, so a
 *   caller never adds a second one.
 * - {@link formatAgo} — "just now" / "5 min ago".
 * - {@link formatSeconds} — the precise form "1,234 s", for messages that name a budget or a
 *   setting given in seconds (`BOUNDED_BUDGET_*_S`), where the reader compares the number itself.
 * - {@link formatWaitSeconds} — a wait in whole seconds, rounded up: "Waiting 47 s".
 */

/** What stands in for a duration that is not a number (NaN, ±Infinity). */
const MISSING = "—";
/** The one approximate marker: nothing outside this module writes it beside a duration. */
const APPROX = "≈";

const UNITS: readonly (readonly [name: string, seconds: number])[] = [
  ["h", 3_600],
  ["min", 60],
  ["s", 1],
];

const trimZero = (s: string) => s.replace(/\.0$/, "");

/** The human text and whether a unit was dropped to get it. */
function human(ms: number): { text: string; approximate: boolean } {
  if (!Number.isFinite(ms)) return { text: MISSING, approximate: false };
  if (ms < 0) {
    const r = human(-ms);
    return r.text === "0 s" ? r : { text: `-${r.text}`, approximate: r.approximate };
  }
  const wholeMs = Math.round(ms);
  if (wholeMs === 0) return { text: "0 s", approximate: false };
  if (wholeMs < 1_000) return { text: `${wholeMs} ms`, approximate: false };
  // Under 10 s a tenth still tells two calls apart (1.4 s vs 1.9 s); above, whole seconds do.
  const tenths = Math.round(ms / 100);
  if (tenths < 100) return { text: `${trimZero((tenths / 10).toFixed(1))} s`, approximate: false };
  const totalS = Math.round(ms / 1_000);
  // 60 s and 120 s read better as minutes; 90 s reads better as 90 s than as "1 min 30 s".
  if (totalS < 120 && totalS % 60 !== 0) return { text: `${totalS} s`, approximate: false };
  // Two units at most, rounded to the smaller one (3 h 59 min 50 s → "4 h", never "3 h 59 min").
  // No days: "55 h" compares with "15 min" at a glance, "2 d 7 h" makes the reader convert.
  const first = UNITS.findIndex(([, size]) => totalS >= size);
  const step = UNITS[Math.min(first + 1, UNITS.length - 1)]![1];
  const rounded = Math.round(totalS / step) * step;
  const parts: string[] = [];
  let rest = rounded;
  for (const [name, size] of UNITS) {
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n} ${name}`);
    rest -= n * size;
  }
  return { text: parts.join(" "), approximate: rounded !== totalS };
}

/**
 * A duration as an on-call engineer reads it: exact where the number is round ("10 min",
 * "90 s", "1 h 30 min"), two units at most, marked "≈" when a smaller unit was dropped
 * ("≈55 h 33 min"). Under 1 s in milliseconds ("450 ms"), under 10 s to a tenth ("2.5 s"),
 * above that to the second (sub-second remainders are not marked). Hours are the largest unit.
 * Negative values keep their sign ("-90 s"); NaN and infinities read "—".
 */
export function formatDuration(ms: number): string {
  const { text, approximate } = human(ms);
  return approximate ? `${APPROX}${text}` : text;
}

/**
 * {@link formatDuration} without the "≈" marker: for a sentence that already says the number is
 * approximate ("about 5 min", "p50 ≈ 1.5 s") — one marker, never "≈≈" — and for measured ages,
 * whose remainder nobody compares against a setting.
 */
export function formatDurationRounded(ms: number): string {
  return human(ms).text;
}

/**
 * An estimated duration, marked once whatever the rounding: "≈ 9 min", "≈ 55 h 33 min"; "—" for
 * a value that is not a number. The spaced marker reads as "is about", as in "p99 ≈ 35 s".
 */
export function formatEstimate(ms: number): string {
  const { text } = human(ms);
  return text === MISSING ? MISSING : `${APPROX} ${text}`;
}

/**
 * How long ago something happened, from its age: "just now" under 2 s (and for a timestamp a
 * skewed clock puts in the future), else "5 min ago".
 */
export function formatAgo(ageMs: number): string {
  if (!Number.isFinite(ageMs)) return MISSING;
  return ageMs < 2_000 ? "just now" : `${formatDurationRounded(ageMs)} ago`;
}

/**
 * The precise form, "1,234 s": whole seconds, rounded to the nearest, thousands separated. For
 * messages that name a budget or a setting given in seconds, where a reader compares the number
 * with the configuration rather than reads it as a length of time.
 */
export function formatSeconds(ms: number): string {
  if (!Number.isFinite(ms)) return MISSING;
  // `|| 0` turns -0 (a rounded -0.4 s) into 0: "-0 s" would read as a sign error.
  return `${formatCount(Math.round(ms / 1_000) || 0)} s`;
}

/**
 * A wait in whole seconds, rounded up and at least "1 s": a job that says "Waiting 47 s" does
 * not resume before 47 s have passed, and a wait is never announced as "0 s".
 */
export function formatWaitSeconds(ms: number): string {
  if (!Number.isFinite(ms)) return MISSING;
  return `${formatCount(Math.max(1, Math.ceil(ms / 1_000)))} s`;
}

/** A retention's length: "90 days", "1 day", "0.5 days"; under a minute (a test's), "2 s". */
export function formatDays(days: number): string {
  if (days * 86_400 < 60) return `${Math.round(days * 86_400)} s`;
  return days === 1 ? "1 day" : `${Number(days.toFixed(2))} days`;
}
