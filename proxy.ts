import { NextResponse, type NextRequest } from "next/server";
import { REQUEST_ID_HEADER, requestIdOf } from "@/lib/http/request-id";
import { contentSecurityPolicy, newNonce } from "@/lib/security/csp";
import { assertWellFormedUrl, MalformedInput } from "@/lib/security/well-formed";

/**
 * Every page request: an address that does not decode to text is a 400 before any page sees it;
 * each response gets a Content-Security-Policy with a fresh nonce (Next.js puts the nonce it finds
 * in the request's policy on its own scripts); and the requested path is passed to the server
 * components, so a visitor sent to /login comes back to the page they asked for. Authorization
 * itself is checked in the pages, actions and routes.
 */
export function proxy(request: NextRequest) {
  try {
    assertWellFormedUrl(request.url);
  } catch (err) {
    if (err instanceof MalformedInput)
      return Response.json({ error: { code: "malformed_input", message: err.message } }, { status: 400 });
    throw err;
  }
  const csp = contentSecurityPolicy(newNonce());
  const headers = new Headers(request.headers);
  headers.set("x-bounded-path", request.nextUrl.pathname + request.nextUrl.search);
  headers.set("content-security-policy", csp);
  // Pages get a request id as API routes do (route()): kept from the caller when well-formed.
  const requestId = requestIdOf(request.headers);
  headers.set(REQUEST_ID_HEADER, requestId);
  const response = NextResponse.next({ request: { headers } });
  response.headers.set("content-security-policy", csp);
  response.headers.set(REQUEST_ID_HEADER, requestId);
  return response;
}

export const config = {
  matcher: ["/((?!api/|_next/|favicon.ico).*)"],
};
