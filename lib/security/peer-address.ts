import http from "node:http";
import { assertWellFormedUrl, MalformedInput } from "./well-formed";

/**
 * The header that carries the TCP peer of a request into the route handlers. Next.js gives them
 * no socket, and it fills `X-Forwarded-For` only when the client sent none (`??=` in its base
 * server): a client that sends its own value is believed. So the web process stamps the socket's
 * address onto every incoming request before Next.js sees it, overwriting anything a client sent
 * under this name.
 */
export const PEER_HEADER = "x-bounded-peer-address";

const INSTALLED = Symbol.for("bounded.peerAddressStamp");
type Holder = { [INSTALLED]?: boolean };

/**
 * Called once at server start (instrumentation.ts); idempotent. Every request the process's HTTP
 * server receives gets the peer stamp; one whose raw address does not decode to text is answered
 * 400 here — Next.js re-encodes a stray `%` in the query before any handler sees it, and fails
 * with a 500 on a broken escape in a dynamic path segment.
 */
export function installPeerAddressStamp(): void {
  const holder = globalThis as Holder;
  if (holder[INSTALLED]) return;
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (this: http.Server, event: string | symbol, ...args: unknown[]) {
    if (event === "request") {
      const [req, res] = args as [http.IncomingMessage, http.ServerResponse];
      req.headers[PEER_HEADER] = req.socket?.remoteAddress ?? "";
      try {
        assertWellFormedUrl(new URL(req.url ?? "/", "http://bounded.invalid").href);
      } catch (err) {
        if (!(err instanceof MalformedInput)) throw err;
        res
          .writeHead(400, { "content-type": "application/json" })
          .end(JSON.stringify({ error: { code: "malformed_input", message: err.message } }));
        return true;
      }
    }
    return Reflect.apply(emit, this, [event, ...args]) as boolean;
  } as typeof emit;
  holder[INSTALLED] = true;
}

/**
 * The socket peer of this request, or null where no stamp is installed (then the header, if any,
 * came from the client and means nothing).
 */
export function peerAddress(headers: Headers): string | null {
  if (!(globalThis as Holder)[INSTALLED]) return null;
  return headers.get(PEER_HEADER) || null;
}
