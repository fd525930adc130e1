import { AsyncLocalStorage } from "node:async_hooks";
import type { Principal } from "./roles";

/**
 * Who the current request turned out to be, noted where the role is checked (`requireRole`) and
 * read by the request's access log line (lib/http/request-log.ts). Here, with the principal,
 * so that checking a role needs nothing of lib/http.
 */
export interface CallerScope {
  principal: Principal | null;
}

const holder = globalThis as unknown as { __boundedRequestScope?: AsyncLocalStorage<CallerScope> };

/** The request scopes of this process (one store even when Next.js loads this module twice). */
export function callerScopes(): AsyncLocalStorage<CallerScope> {
  holder.__boundedRequestScope ??= new AsyncLocalStorage<CallerScope>();
  return holder.__boundedRequestScope;
}

/** Records who the current request turned out to be (called where the role is checked), for its access log line. */
export function noteCaller(principal: Principal): void {
  const scope = callerScopes().getStore();
  if (scope) scope.principal = principal;
}
