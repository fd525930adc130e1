/**
 * Requests whose address or fields cannot be read as text are refused before any handler: a `%`
 * escape that decodes to nothing (`%E0%A4%A`, a lone `%`) or a NUL byte (PostgreSQL refuses NUL
 * in text, so it would surface as a 500 where it is stored).
 */
export class MalformedInput extends Error {
  override name = "MalformedInput";
}

function decoded(part: string, what: string): string {
  let text: string;
  try {
    text = decodeURIComponent(part.replaceAll("+", " "));
  } catch {
    throw new MalformedInput(
      `The ${what} has a malformed %-escape ("${part.slice(0, 40)}"): escape "%" itself as %25.`,
    );
  }
  if (text.includes("\0")) throw new MalformedInput(`The ${what} contains a NUL byte (%00), which no field accepts.`);
  return text;
}

/** Throws `MalformedInput` for a path or query string that does not decode to text. */
export function assertWellFormedUrl(url: string): void {
  const { pathname, search } = new URL(url);
  for (const segment of pathname.split("/")) decoded(segment, "address");
  for (const pair of search.replace(/^\?/, "").split("&"))
    for (const part of pair.split("=")) decoded(part, "query string");
}

/** Throws `MalformedInput` for a NUL byte anywhere in a parsed JSON value (keys included). */
export function assertNoNul(value: unknown, where = "body"): void {
  if (typeof value === "string") {
    if (value.includes("\0"))
      throw new MalformedInput(`A field of the ${where} contains a NUL byte (\\u0000), which no field accepts.`);
  } else if (Array.isArray(value)) {
    for (const v of value) assertNoNul(v, where);
  } else if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      assertNoNul(k, where);
      assertNoNul(v, where);
    }
  }
}
