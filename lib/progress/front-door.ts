import http from "node:http";
import { logRequest } from "@/lib/http/request-log";
import { REQUEST_ID_HEADER, requestIdOf } from "@/lib/http/request-id";
import { routePattern } from "@/lib/http/request-metrics";
import { metrics } from "@/lib/metrics/metrics";
import { clientAddressOf } from "@/lib/security/client-address";
import { SECURITY_HEADERS } from "@/lib/security/headers";
import { progressAnswer } from "./respond";
import { heldSnapshot } from "./snapshot";
import { admitStream, EVENT_STREAM_HEADERS, lastSeenVersion, pumpEvents } from "./stream";

/**
 * Progress polls and streams answered before the framework routes them. A watcher's page polls
 * once a second whether its job changed, or holds a stream that is written to at every change;
 * this process usually holds the job's current answer in memory (./snapshot.ts, kept current by the
 * subscription in ./hub.ts). Routing each poll through Next.js, and writing each event through its
 * Web streams, costs most of a web process's CPU when a thousand pages watch; answering from the
 * server's request hook and writing to the socket costs a fraction of that, which leaves the
 * process free to push changes at once and the machine free for the work being watched.
 *
 * Only what this process can answer as the route handlers would is answered here: a `GET` of
 * `/api/progress/<token>` or `/api/progress/<token>/events` whose answer `heldSnapshot` vouches
 * for. Anything else — an unknown or first-seen token, a stale or missing copy, the subscription
 * down, an address at its stream cap, any other path or method — goes on to Next.js and the route
 * handlers in `app/api/progress/[token]/`, unchanged.
 */

/** The names `app/api/progress/[token]/route.ts` and `…/events/route.ts` give their handlers: one series for both ways in. */
const ROUTE = routePattern("GET /api/progress/:token");
const EVENTS_ROUTE = routePattern("GET /api/progress/:token/events");
const PROGRESS_PATH = /^\/api\/progress\/([0-9a-f]{32})(\/events)?(?:\?[^#]*)?$/;

/** A request header as one string (repeated ones joined), or null. */
function headerOf(req: http.IncomingMessage, name: string): string | null {
  const value = req.headers[name];
  return (Array.isArray(value) ? value.join(", ") : value) ?? null;
}

/** What every answer given here ends with: the request metrics and the access log line, as `route()` writes them. */
function observed(route: string, status: number, requestId: string, started: number): void {
  metrics.observeRequest({ method: "GET", route, status, seconds: (performance.now() - started) / 1000 });
  logRequest({ requestId, method: "GET", route, status, startedMs: started, principal: null, traceId: "" });
}

/**
 * Answers `req` when it is a progress poll or stream this process holds the job's answer for: a
 * poll with the route's status, headers and body; a stream as the events route opens it (same
 * events, same per-address cap: an address at its cap goes on to the route, which answers the
 * 429). Either carries the response headers every answer carries, its access log line and its
 * request metrics. Returns whether it answered; when not, it has touched nothing.
 */
export function answerFromCopy(req: http.IncomingMessage, res: http.ServerResponse): boolean {
  if (req.method !== "GET") return false;
  const path = PROGRESS_PATH.exec(req.url ?? "");
  const snapshot = path ? heldSnapshot(path[1]!) : undefined;
  if (!path || !snapshot) return false;
  const started = performance.now();
  const requestId = requestIdOf({ get: (name) => headerOf(req, name) });
  if (path[2]) {
    const release = admitStream(clientAddressOf(req.socket.remoteAddress ?? null, headerOf(req, "x-forwarded-for")));
    if (!release) return false;
    res.writeHead(200, { ...SECURITY_HEADERS, ...EVENT_STREAM_HEADERS, [REQUEST_ID_HEADER]: requestId });
    res.flushHeaders();
    const stop = pumpEvents(
      { write: (text) => res.write(text), end: () => res.end() },
      {
        token: path[1]!,
        lastSeen: lastSeenVersion(headerOf(req, "last-event-id")),
        initial: snapshot,
        data: (s) => s.body,
        release,
      },
    );
    res.once("close", stop);
    observed(EVENTS_ROUTE, 200, requestId, started);
    return true;
  }
  const answer = progressAnswer(snapshot, headerOf(req, "if-none-match"));
  res.writeHead(answer.status, { ...SECURITY_HEADERS, ...answer.headers, [REQUEST_ID_HEADER]: requestId });
  res.end(answer.body ?? undefined);
  metrics.progressPollsFromCopy.inc();
  observed(ROUTE, answer.status, requestId, started);
  return true;
}

const INSTALLED = Symbol.for("bounded.progressFrontDoor");

/**
 * Puts `answerFromCopy` in front of every HTTP server of this process (instrumentation.ts, once
 * at start; idempotent). A failure in it never fails the request: the framework answers instead.
 */
export function installProgressFrontDoor(): void {
  const holder = globalThis as { [INSTALLED]?: boolean };
  if (holder[INSTALLED]) return;
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (this: http.Server, event: string | symbol, ...args: unknown[]) {
    if (event === "request") {
      const [req, res] = args as [http.IncomingMessage, http.ServerResponse];
      let answered = false;
      try {
        answered = answerFromCopy(req, res);
      } catch {
        answered = res.headersSent;
      }
      if (answered) return true;
    }
    return Reflect.apply(emit, this, [event, ...args]) as boolean;
  } as typeof emit;
  holder[INSTALLED] = true;
}
