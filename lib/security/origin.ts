/**
 * Whether a request signed in by its session cookie came from Bounded's own pages. A cookie is
 * sent by the browser whoever made the page that sends the request: a page on a sibling host
 * (`evil.example.com` next to `bounded.example.com` is "same site", so even a SameSite=Lax cookie
 * goes along) could otherwise act as the signed-in person. Browsers always send `Origin` on
 * POST/PUT/PATCH/DELETE and on cross-origin reads; with `Referrer-Policy: no-referrer` a form post
 * says `Origin: null`, and then `Sec-Fetch-Site` (which no page can forge) decides. A request
 * without either header is not from a browser, so no other site made it.
 *
 * Returns why the request is refused, or null when it may act with the cookie.
 */
export function crossOriginRefusal(headers: Headers): string | null {
  const origin = headers.get("origin");
  if (origin === null) return null;
  const fetchSite = headers.get("sec-fetch-site");
  if (origin === "null") {
    if (fetchSite === null || fetchSite === "same-origin") return null;
    return `Refused: this request came from another page (Origin: null, Sec-Fetch-Site: ${fetchSite}). ${HOW}`;
  }
  const host = (headers.get("x-forwarded-host") ?? headers.get("host") ?? "").split(",")[0]!.trim().toLowerCase();
  let originHost: string;
  try {
    originHost = new URL(origin).host.toLowerCase();
  } catch {
    return `Refused: the Origin header "${origin.slice(0, 100)}" is not a URL. ${HOW}`;
  }
  return originHost === host
    ? null
    : `Refused: this request came from ${origin.slice(0, 100)}, not from this site. ${HOW}`;
}

const HOW =
  "A signed-in browser may only act from Bounded's own pages; API clients send `Authorization: Bearer <token>`.";
