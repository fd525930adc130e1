/**
 * Whose fault an error met by one item is: the one rule, for every job kind, at the one place an
 * item's outcome is written (./for-each-item.ts). An item is recorded as failed only for what is
 * its own:
 * - its input: an `ItemError` a processor raises (a row that does not validate, a file that
 *   cannot be read), or a value the database refuses to store (SQLSTATE classes 22 and 23);
 * - what the provider did with this item alone: an answer about its content (an `ItemError`
 *   too), or a model call the provider refused for good (a `ModelCallError` that is not
 *   retryable: a 400 for its length or content);
 * - a failure it repeats while the other items go through (a poison item: ./for-each-item.ts
 *   redoes an item whose fault is `unknown` before it is anybody's).
 * Nothing else is the item's: a control signal (the deadline, a fence lost, a shutdown, a cancel,
 * a deferral) or the run's abort ends the loop with the item uncommitted; PostgreSQL or Redis
 * away is waited out and the item redone. So a fault of the platform never becomes a failure of
 * the customer's row.
 */
import { isDependencyUnavailable } from "@/lib/dependencies/unavailable";
import { isControlSignal, ItemError } from "@/lib/core/signals";
import { ModelCallError } from "@/lib/modelcalls/errors";

export type ItemFault =
  /** The item's own: recorded as its failure, with the words a person reads next to it. */
  | { of: "item"; reason: string }
  /** PostgreSQL or Redis is not reachable: the item waits for it and is redone. */
  | { of: "dependency" }
  /** A control signal or the run's abort: the loop ends, the item stays for the resume. */
  | { of: "run" }
  /** Not known to be anybody's: the item is redone; it is a poison item only if it repeats while others go through. */
  | { of: "unknown" };

/** Whose fault `err` is, met by an item of the run whose signal is `signal`. */
export function itemFault(err: unknown, signal: AbortSignal): ItemFault {
  // A deadline that arrives as any error (wrapped, re-thrown, swallowed into another) is still the deadline.
  if (signal.aborted || isControlSignal(err)) return { of: "run" };
  if (isDependencyUnavailable(err)) return { of: "dependency" };
  if (err instanceof ItemError) return { of: "item", reason: err.message };
  if (err instanceof ModelCallError && !err.retryable && err.status !== undefined)
    return { of: "item", reason: `could not be processed: the model service refused it (HTTP ${err.status})` };
  const refused = refusedValueReason(err);
  if (refused) return { of: "item", reason: refused };
  return { of: "unknown" };
}

/** What a poison item reads: it failed every time while the others went through. The error's text stays in the log. */
export function poisonReason(tries: number): string {
  return `could not be processed: it failed ${tries} times while the other items went through (logged for the operators)`;
}

/**
 * SQLSTATEs (PostgreSQL) and Prisma codes of a value the database refuses to store → the reason
 * shown. The row's values are validated before they are written (lib/imports/rows.ts,
 * lib/db/storable.ts); this is the net under that: whatever still does not fit fails its item
 * alone. Classes 22 (data exception) and 23 (integrity constraint) only: any other refusal
 * (serialization, a lock, a timeout, the server stopping) says nothing of the item's value.
 */
const REFUSED_VALUES: [test: RegExp, reason: string][] = [
  [/^(22003|P2020)$/, "could not be stored: a number is out of the range the database can hold"],
  [/^(22007|22008)$/, "could not be stored: a date is out of the range the database can hold"],
  [/^(22021|22P05)$/, "could not be stored: it contains characters the database cannot hold"],
  [/^(22001|P2000)$/, "could not be stored: a text is longer than the database can hold"],
  [/^(23505|P2002)$/, "could not be stored: it duplicates a record that already exists"],
  [/^(23\w{3}|P2003|P2011)$/, "could not be stored: it breaks a rule of the database"],
  [/^22\w{3}$/, "could not be stored: a value is not one the database can hold"],
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

/** Why the database refused one item's value, or null when the error is not such a refusal. */
export function refusedValueReason(err: unknown): string | null {
  const codes = codesOf(err);
  for (const [test, reason] of REFUSED_VALUES) if (codes.some((c) => test.test(c))) return reason;
  return null;
}
