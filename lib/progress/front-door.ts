import http from "node:http";
import { logRequest } from "@/lib/http/request-log";
import { REQUEST_ID_HEADER, requestIdOf } from "@/lib/http/request-id";
import { routePattern } from "@/lib/http/request-metrics";
import { metrics } from "@/lib/metrics/metrics";
import { SECURITY_HEADERS } from "@/lib/security/headers";
import { progressAnswer } from "./respond";
import { heldSnapshot } from "./snapshot";

/**
 * A progress poll answered before the framework routes it. A watcher whose page polls asks once a
 * second whether its job changed; the answer is almost always "no" (`304`), and this process
 * usually holds the job's current answer in memory (./snapshot.ts, kept current by the
 * subscription in ./hub.ts). Routing such a request through Next.js costs most of a web process's
 * CPU when a thousand pages poll; answering it from the server's request hook costs next to
 * nothing, which leaves the process free to push changes to the streams.
 *
 * Only a poll this process can answer as the route handler would is answered here: a `GET` of
 * `/api/progress/<token>` whose answer `heldSnapshot` vouches for. Anything else — an unknown or
 * first-seen token, a stale or missing copy, the subscription down, any other path or method —
 * goes on to Next.js and `app/api/progress/[token]/route.ts`, unchanged.
 */

/** The name `app/api/progress/[token]/route.ts` gives its handler: one series for both ways in. */
const ROUTE = routePattern("GET /api/progress/:token");
const POLL = /^\/api\/progress\/([0-9a-f]{32})(?:\?[^#]*)?$/;

/**
 * Answers `req` when it is a progress poll this process holds the answer to, with the route's
 * status, headers and body, the response headers every answer carries, its access log line and
 * its request metrics. Returns whether it answered; when not, it has touched nothing.
 */
export function answerPollFromCopy(req: http.IncomingMessage, res: http.ServerResponse): boolean {
  if (req.method !== "GET") return false;
  const poll = POLL.exec(req.url ?? "");
  const snapshot = poll ? heldSnapshot(poll[1]!) : undefined;
  if (!snapshot) return false;
  const started = performance.now();
  const header = (name: string) => {
    const value = req.headers[name];
    return (Array.isArray(value) ? value.join(", ") : value) ?? null;
  };
  const requestId = requestIdOf({ get: header });
  const answer = progressAnswer(snapshot, header("if-none-match"));
  res.writeHead(answer.status, { ...SECURITY_HEADERS, ...answer.headers, [REQUEST_ID_HEADER]: requestId });
  res.end(answer.body ?? undefined);
  metrics.progressPollsFromCopy.inc();
  metrics.observeRequest({
    method: "GET",
    route: ROUTE,
    status: answer.status,
    seconds: (performance.now() - started) / 1000,
  });
  logRequest({
    requestId,
    method: "GET",
    route: ROUTE,
    status: answer.status,
    startedMs: started,
    principal: null,
    traceId: "",
  });
  return true;
}

const INSTALLED = Symbol.for("bounded.progressFrontDoor");

/**
 * Puts `answerPollFromCopy` in front of every HTTP server of this process (instrumentation.ts, once
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
        answered = answerPollFromCopy(req, res);
      } catch {
        answered = res.headersSent;
      }
      if (answered) return true;
    }
    return Reflect.apply(emit, this, [event, ...args]) as boolean;
  } as typeof emit;
  holder[INSTALLED] = true;
}
