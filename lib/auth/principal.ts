import "server-only";
import { headers } from "next/headers";
import { redirect } from "next/navigation";
import { crossOriginRefusal } from "@/lib/security/origin";
import { noteCaller } from "./caller";
import { CrossOriginRefused, Forbidden, Unauthenticated } from "./errors";
import { hasRole, type Principal, type Role } from "./roles";
import { principalFromSession } from "./session";
import { principalFromToken } from "./tokens";

/**
 * The caller of this request: a bearer token wins over a session cookie. A cookie-signed request
 * from another site's page is refused (`CrossOriginRefused`, 403): see lib/security/origin.ts.
 */
export async function currentPrincipal(): Promise<Principal | null> {
  const h = await headers();
  const authorization = h.get("authorization");
  if (authorization !== null) {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    // A malformed or unknown token never falls back to the cookie: the caller meant the token.
    return match ? principalFromToken(match[1]!) : null;
  }
  const principal = await principalFromSession();
  const refusal = principal ? crossOriginRefusal(h) : null;
  if (refusal) throw new CrossOriginRefused(refusal);
  return principal;
}

/** For route handlers and server actions: the principal, or a typed 401/403 error. */
export async function requireRole(role: Role): Promise<Principal> {
  const principal = await currentPrincipal();
  if (!principal) throw new Unauthenticated();
  noteCaller(principal);
  if (!hasRole(principal, role))
    throw new Forbidden(`This needs the ${role} role; you are signed in as ${principal.role}.`);
  return principal;
}

/** For pages: anonymous visitors go to /login and come back afterwards. */
export async function requirePageViewer(returnTo: string): Promise<Principal> {
  const principal = await principalFromSession();
  if (!principal) redirect(`/login?next=${encodeURIComponent(returnTo)}`);
  return principal;
}
