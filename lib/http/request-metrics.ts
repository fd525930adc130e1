import { metrics } from "@/lib/metrics/metrics";

/**
 * `bounded_http_requests_total` and `bounded_http_request_duration_seconds` for every API request,
 * labelled by the route's pattern as its file sits under `app/` (`/api/jobs/[id]`): a label per
 * raw path would make a series per job id.
 */

/** The `route` label of a request whose handler has no `"<METHOD> /api/…"` name. */
export const UNNAMED_ROUTE = "unnamed";

/**
 * The route pattern of a handler's name: `"GET /api/jobs/:id"` → `"/api/jobs/[id]"`, the path of
 * its `route.ts` under `app/` (a test holds every handler to that). Never the request's path.
 */
export function routePattern(name: string): string {
  const named = /^[A-Z]+ (\/\S*)$/.exec(name);
  return named ? named[1]!.replace(/:([A-Za-z0-9_]+)/g, "[$1]") : UNNAMED_ROUTE;
}

/**
 * Counts one answered request and observes its duration since `startedMs` (`performance.now()`
 * when the request reached `route()`). Returns the response, so `route()` can end with it.
 */
export function recordRequestMetrics(request: Request, name: string, startedMs: number, response: Response): Response {
  metrics.observeRequest({
    method: request.method,
    route: routePattern(name),
    status: response.status,
    seconds: (performance.now() - startedMs) / 1000,
  });
  return response;
}
