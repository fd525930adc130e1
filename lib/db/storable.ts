/**
 * What PostgreSQL can store, checked before a value from outside (an uploaded row, a service's
 * answer) is written, so that a value it would refuse fails its own item with a clear reason
 * instead of failing the write of a whole batch.
 */

/** The range of a PostgreSQL `bigint` (Prisma `BigInt`), e.g. amounts in minor units. */
export const BIGINT_MIN = -(2n ** 63n);
export const BIGINT_MAX = 2n ** 63n - 1n;

/**
 * Dates a business record may carry: PostgreSQL's `date` holds 4713 BC to 5874897 AD, but a
 * transaction dated 0001 or 9999 is a typo or a placeholder, not a date; these bounds catch those
 * while admitting any real ledger.
 */
export const DATE_MIN = "1900-01-01";
export const DATE_MAX = "2199-12-31";

/** A UTF-16 surrogate without its pair (matched code unit by code unit: no `u` flag). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** Why a text cannot be stored as it is, or null. PostgreSQL `text` and `jsonb` refuse NUL; a lone UTF-16 surrogate is no character at all. */
export function textProblem(value: string): string | null {
  if (value.includes("\u0000")) return "contains a NUL character";
  if (new RegExp(LONE_SURROGATE.source).test(value)) return "contains invalid Unicode (a lone surrogate)";
  return null;
}

/** A text from an outside service made storable: NUL characters dropped, lone surrogates replaced by U+FFFD. */
export function storableText(value: string): string {
  return value.replaceAll("\u0000", "").replace(LONE_SURROGATE, "\uFFFD");
}

/** Why an integer cannot be stored in a `bigint`, or null. */
export function bigintProblem(value: bigint): string | null {
  return value < BIGINT_MIN || value > BIGINT_MAX ? "is too large to be stored" : null;
}

/** Why an ISO date (`YYYY-MM-DD`) is outside the accepted range, or null. */
export function dateProblem(isoDate: string): string | null {
  return isoDate < DATE_MIN || isoDate > DATE_MAX ? `is outside ${DATE_MIN} … ${DATE_MAX}` : null;
}
