import { z } from "zod";
import { Forbidden, Unauthenticated } from "@/lib/auth/errors";
import { requireRole } from "@/lib/auth/principal";
import { RETRY_AFTER_SECONDS, unavailableDependency, unavailableMessage } from "@/lib/dependencies/unavailable";
import type { Principal, Role } from "@/lib/auth/roles";
import { logger } from "@/lib/log";
import { isOutsideServiceDown, isRateLimitCapExceeded } from "@/lib/ratelimit/errors";
import { observeRequest } from "./request-log";
import { recordRequestMetrics } from "./request-metrics";
import { auditRefusedCall } from "@/lib/audit/refused-call";
import { assertWellFormedUrl, MalformedInput } from "@/lib/security/well-formed";
import { TenantBeingDeleted } from "@/lib/tenants/being-deleted";
import { ApiError, type ErrorBody } from "./errors";

const log = logger("api");

export function errorResponse(
  status: number,
  code: string,
  message: string,
  extra: { issues?: ErrorBody["error"]["issues"]; headers?: Record<string, string> } = {},
): Response {
  const body: ErrorBody = { error: { code, message, ...(extra.issues ? { issues: extra.issues } : {}) } };
  return Response.json(body, { status, headers: extra.headers });
}

/**
 * The message of a 422 names what is wrong (the first three problems), so a caller reading only
 * `message` (a log line, a CLI) still knows which field to fix; `issues` has them all.
 */
function invalidRequestMessage(issues: { path: string; message: string }[]): string {
  const shown = issues.slice(0, 3).map((i) => (i.path ? `${i.path}: ${i.message}` : i.message));
  const more = issues.length > 3 ? ` (and ${issues.length - 3} more)` : "";
  return `The request has invalid fields — ${shown.join("; ")}${more}.`;
}

/** Every failure a handler can meet, mapped to the JSON error shape; never a stack trace. */
export function toErrorResponse(err: unknown, route: string): Response {
  if (err instanceof ApiError) return errorResponse(err.status, err.code, err.message, { headers: err.headers });
  if (err instanceof MalformedInput) return errorResponse(400, "malformed_input", err.message);
  if (err instanceof Unauthenticated) return errorResponse(401, "unauthenticated", err.message);
  if (err instanceof Forbidden) return errorResponse(403, "forbidden", err.message);
  // New work for a tenant whose deletion was started: refused, nothing saved.
  if (err instanceof TenantBeingDeleted) return errorResponse(409, "tenant_being_deleted", err.message);
  // Outside a job there is no "later": the caller is told when to come back.
  if (isRateLimitCapExceeded(err)) {
    return errorResponse(429, "rate_limited", err.message, {
      headers: { "Retry-After": String(err.retryAfterSeconds) },
    });
  }
  // An outside service's circuit breaker is open: nothing was sent; the caller comes back after the next probe.
  if (isOutsideServiceDown(err)) {
    return errorResponse(503, "outside_service_down", `${err.message} Try again in ${err.retryAfterSeconds} s.`, {
      headers: { "Retry-After": String(err.retryAfterSeconds) },
    });
  }
  // PostgreSQL or Redis down: answered at once (the clients' timeouts are short), never a hang.
  const down = unavailableDependency(err);
  if (down) {
    log.warn(
      { route, dependency: down, err: err instanceof Error ? err.message : String(err) },
      "dependency not reachable",
    );
    return errorResponse(503, "unavailable", unavailableMessage(down), {
      headers: { "Retry-After": String(RETRY_AFTER_SECONDS) },
    });
  }
  if (err instanceof z.ZodError) {
    const issues = err.issues.map((i) => ({ path: i.path.join("."), message: i.message }));
    return errorResponse(422, "invalid_request", invalidRequestMessage(issues), { issues });
  }
  log.error({ err, route }, "unhandled error in route handler");
  return errorResponse(500, "internal", "Something went wrong on our side. It has been logged.");
}

type Access = Role | "public";

/**
 * Wraps a route handler: checks the role on the server before anything else, and maps errors.
 * Every route handler goes through this, so none can forget authorization.
 */
export function route<Ctx>(
  access: Access,
  handler: (request: Request, ctx: Ctx, principal: Principal | null) => Promise<Response>,
  name = "route",
) {
  return async (request: Request, ctx: Ctx): Promise<Response> => {
    const started = performance.now();
    const response = await observeRequest(request, name, async () => {
      try {
        assertWellFormedUrl(request.url);
        const principal = access === "public" ? null : await requireRole(access);
        return await handler(request, ctx, principal);
      } catch (err) {
        const response = toErrorResponse(err, name);
        await auditRefusedCall(name, response, err);
        return response;
      }
    });
    return recordRequestMetrics(request, name, started, response);
  };
}

/** Parses search params with a zod schema; unknown params are ignored, bad ones are a 422. */
export function parseQuery<T extends z.ZodType>(request: Request, schema: T): z.infer<T> {
  const params = Object.fromEntries(new URL(request.url).searchParams);
  return schema.parse(params);
}
