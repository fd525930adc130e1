/**
 * The id that ties a request's log lines together and to what the caller saw: an incoming
 * `x-request-id` (set by a proxy or a client) is kept when it is well-formed, otherwise one is
 * generated. Answered as a response header. No Node-only imports: `proxy.ts` uses it too.
 */

export const REQUEST_ID_HEADER = "x-request-id";

/** Printable, no spaces, bounded: anything else could forge or bloat a log line. */
const WELL_FORMED_ID = /^[A-Za-z0-9._:-]{8,128}$/;

export function requestIdOf(headers: Pick<Headers, "get">): string {
  const incoming = headers.get(REQUEST_ID_HEADER);
  return incoming && WELL_FORMED_ID.test(incoming) ? incoming : crypto.randomUUID();
}
