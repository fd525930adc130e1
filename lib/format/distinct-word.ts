/**
 * A word of its own for every n, with no digits: "qa", "qb", … "qba". Rows of a test, a bench or the demo
 * that must each be a question of their own say `row ${distinctWord(i)}`, because the category
 * question reads a word with three or more digits as `#` (lib/modelcalls/choose-category.ts):
 * "row 123" and "row 124" ask the same and share one answer. The leading q keeps it from being a
 * word the simulated model knows ("bus", "tax").
 */
export function distinctWord(n: number): string {
  let k = Math.floor(Math.abs(n));
  let letters = "";
  do {
    letters = String.fromCharCode(97 + (k % 26)) + letters;
    k = Math.floor(k / 26);
  } while (k > 0);
  return `q${letters}`;
}
