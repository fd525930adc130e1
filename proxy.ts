import { NextResponse, type NextRequest } from "next/server";

/**
 * Passes the requested path to the server components, so a visitor sent to /login comes back to
 * the page they asked for. Authorization itself is checked in the pages, actions and routes.
 */
export function proxy(request: NextRequest) {
  const headers = new Headers(request.headers);
  headers.set("x-bounded-path", request.nextUrl.pathname + request.nextUrl.search);
  return NextResponse.next({ request: { headers } });
}

export const config = {
  matcher: ["/((?!api/|_next/|favicon.ico).*)"],
};
