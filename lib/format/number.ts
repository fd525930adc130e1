/**
 * A count as people read it: whole numbers with thousands separated ("12,345"), the same on the
 * server and in the browser whatever their locale. Pure (no imports): every page and message uses it.
 */
export function formatCount(n: number | bigint): string {
  return n.toLocaleString("en-US");
}

/**
 * An estimated cost in US dollars, to the precision that matters at its size: "$0.031",
 * "$4.20", "$1,234"; under a tenth of a cent "<$0.001"; "—" when there is no estimate.
 */
export function formatUsd(usd: number | null): string {
  if (usd === null) return "—";
  if (usd === 0) return "$0";
  if (usd < 0.001) return "<$0.001";
  if (usd < 1) return `$${usd.toFixed(3)}`;
  if (usd < 100) return `$${usd.toFixed(2)}`;
  return `$${formatCount(Math.round(usd))}`;
}
