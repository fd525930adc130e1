/**
 * A count as people read it: whole numbers with thousands separated ("12,345"), the same on the
 * server and in the browser whatever their locale. Pure (no imports): every page and message uses it.
 */
export function formatCount(n: number | bigint): string {
  return n.toLocaleString("en-US");
}
