/**
 * A pace as people read it: "42 rows per second", "4.2 rows per second", "3 documents per
 * minute". Pure (no imports), so the server and the browser render the same text.
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
  const value = roundRate(perSecond * seconds);
  const text = value < 10 ? value.toFixed(1).replace(/\.0$/, "") : value.toLocaleString("en-US");
  return `${text} ${text === "1" ? noun : `${noun}s`} per ${unit}`;
}

/** Under 10 to a tenth, above to the unit: the precision the text shows. */
function roundRate(n: number): number {
  return n < 9.95 ? Math.round(n * 10) / 10 : Math.round(n);
}
