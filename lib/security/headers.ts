/**
 * The headers every response of the web carries. Next.js adds them from `next.config.js`
 * (`headers()`); an answer given before Next.js routes the request (lib/progress/front-door.ts)
 * adds them itself from here. A test holds the two lists equal (./headers.test.ts).
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "X-Frame-Options": "DENY",
};
