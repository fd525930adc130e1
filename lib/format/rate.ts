import { formatDurationRounded } from "./duration";
import { formatCount } from "./number";

/**
 * A pace as people read it: "42 rows per second", "4.2 rows per second", "3 documents per
 * minute", or in a table "12 / min". Pure (only lib/format), so the server and the browser render
 * the same text.
 */

/** Per second while at least one a second; slower paces in a unit whose number is at least 1. */
const UNITS: readonly (readonly [name: string, seconds: number])[] = [
  ["second", 1],
  ["minute", 60],
  ["hour", 3_600],
];

/**
 * `perSecond` items called `noun` in the largest unit that counts at least one of them (a
 * person checks "3 per minute" against a clock more easily than "0.05 per second"). Under 10 to
 * a tenth, above in whole numbers with thousands separated. A pace that is not a positive number
 * reads "—".
 */
export function formatRate(perSecond: number, noun: string): string {
  if (!Number.isFinite(perSecond) || perSecond <= 0) return "—";
  const [unit, seconds] = UNITS.find(([, s]) => roundRate(perSecond * s) >= 1) ?? UNITS[UNITS.length - 1]!;
  const text = formatPace(perSecond * seconds);
  return `${text} ${text === "1" ? noun : `${noun}s`} per ${unit}`;
}

/**
 * A pace's number in the unit it is given in: under 10 to a tenth without a trailing ".0",
 * above in whole numbers with thousands separated ("4.2", "3", "1,235"); 0 reads "0".
 */
export function formatPace(value: number): string {
  const rounded = roundRate(value);
  return rounded < 10 ? rounded.toFixed(1).replace(/\.0$/, "") : formatCount(rounded);
}

/** A count per minute, as a table cell: "12 / min", "0.4 / min". */
export function formatPerMinute(perMinute: number): string {
  return `${formatPace(perMinute)} / min`;
}

/** The same pace in an operator's short form: "21 rows/s", "2.5 rows/s", or for a slow kind "one document every 12 s". */
export function formatCompactRate(perSecond: number, noun: string): string {
  if (perSecond >= 1) return `${formatPace(perSecond)} ${noun}s/s`;
  return `one ${noun} every ${formatDurationRounded(1000 / perSecond)}`;
}

/** Under 10 to a tenth, above to the unit: the precision the text shows. */
function roundRate(n: number): number {
  return n < 9.95 ? Math.round(n * 10) / 10 : Math.round(n);
}
