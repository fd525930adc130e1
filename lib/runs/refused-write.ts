/**
 * Why the database refused one item's write, in the words a person reads next to the item. The
 * row's values are validated before they are written (lib/imports/rows.ts, lib/db/storable.ts);
 * this is the net under that: whatever still does not fit fails its item alone.
 */

/** SQLSTATE classes and codes (PostgreSQL) and Prisma codes → the reason shown. */
const REASONS: [test: RegExp, reason: string][] = [
  [/^(22003|P2020)$/, "could not be stored: a number is out of the range the database can hold"],
  [/^(22007|22008)$/, "could not be stored: a date is out of the range the database can hold"],
  [/^(22021|22P05)$/, "could not be stored: it contains characters the database cannot hold"],
  [/^(22001|P2000)$/, "could not be stored: a text is longer than the database can hold"],
  [/^(23505|P2002)$/, "could not be stored: it duplicates a record that already exists"],
  [/^(23\w{3}|P2003|P2011)$/, "could not be stored: it breaks a rule of the database"],
];

/** The SQLSTATE or Prisma code of an error, looked for in the error, its `cause` and Prisma's `meta`. */
function codesOf(err: unknown, depth = 0): string[] {
  if (err === null || typeof err !== "object" || depth > 4) return [];
  const e = err as {
    code?: unknown;
    originalCode?: unknown;
    cause?: unknown;
    meta?: unknown;
    driverAdapterError?: unknown;
  };
  const own = [e.code, e.originalCode].filter((c): c is string => typeof c === "string");
  return [...own, ...[e.cause, e.meta, e.driverAdapterError].flatMap((inner) => codesOf(inner, depth + 1))];
}

export function refusedWriteReason(err: unknown): string {
  const codes = codesOf(err);
  for (const [test, reason] of REASONS) if (codes.some((c) => test.test(c))) return reason;
  const message = err instanceof Error ? err.message : String(err);
  if (/out of range/i.test(message)) return "could not be stored: a value is out of the range the database can hold";
  if (/invalid byte sequence|0x00|null character/i.test(message))
    return "could not be stored: it contains characters the database cannot hold";
  return "could not be stored: the database refused it (logged for the operators)";
}
