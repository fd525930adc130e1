import { callerScopes, type CallerScope } from "@/lib/auth/caller";
import { logger } from "@/lib/log";
import { unscaled } from "@/lib/time";
import { parseTraceparent } from "@/lib/tracing/traceparent";
import { inSpan } from "@/lib/tracing/tracing";
import { REQUEST_ID_HEADER, requestIdOf } from "./request-id";
import { routePattern } from "./request-metrics";

/**
 * One access log line and one server span per API request, and the request id (./request-id.ts)
 * that ties the two to the caller, returned as a response header.
 */

const log = logger("http");

/**
 * Runs a route handler as an observed request: a server span continuing the caller's
 * `traceparent`, the `x-request-id` response header, and the access log line (method, route
 * pattern, status, duration, principal, request id, trace id). The handler never throws here:
 * `route()` maps its errors to responses first.
 */
export async function observeRequest(
  request: Request,
  name: string,
  handle: () => Promise<Response>,
): Promise<Response> {
  const started = performance.now();
  const requestId = requestIdOf(request.headers);
  const route = routePattern(name);
  const scope: CallerScope = { principal: null };
  let traceId = "";
  const response = await callerScopes().run(scope, () =>
    inSpan(
      `${request.method} ${route}`,
      {
        kind: "server",
        parent: parseTraceparent(request.headers.get("traceparent")),
        attributes: { "http.request.method": request.method, "http.route": route },
      },
      async (span) => {
        traceId = span.spanContext().traceId;
        const answered = await handle();
        span.setAttribute("http.response.status_code", answered.status);
        return answered;
      },
    ),
  );
  const withId = withHeader(response, REQUEST_ID_HEADER, requestId);
  logRequest({
    requestId,
    method: request.method,
    route,
    status: response.status,
    startedMs: started,
    principal: scope.principal,
    traceId,
  });
  return withId;
}

/**
 * The access log line of one answered request (`started`: `performance.now()` when it arrived);
 * also written by answers given before the framework's routing (lib/progress/front-door.ts).
 */
export function logRequest(request: {
  requestId: string;
  method: string;
  route: string;
  status: number;
  startedMs: number;
  principal: CallerScope["principal"];
  traceId: string;
}): void {
  const line = {
    requestId: request.requestId,
    method: request.method,
    route: request.route,
    status: request.status,
    // Production ms, like every duration the system reports (the metric is the same figure).
    durationMs: Math.round(unscaled(performance.now() - request.startedMs) * 10) / 10,
    principal: request.principal ? request.principal.username : "anonymous",
    via: request.principal?.via,
    traceId: request.traceId,
  };
  if (request.status >= 500) log.error(line, "request");
  else log.info(line, "request");
}

/** A response's headers may be immutable (one passed through from `fetch`): then it is copied. */
function withHeader(response: Response, name: string, value: string): Response {
  try {
    response.headers.set(name, value);
    return response;
  } catch {
    const copy = new Response(response.body, response);
    copy.headers.set(name, value);
    return copy;
  }
}
