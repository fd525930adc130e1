/** 128 random bits, base64: a nonce for one response. */
export function newNonce(): string {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return btoa(String.fromCharCode(...bytes));
}

/**
 * The Content-Security-Policy of every page. Scripts: only those carrying this response's nonce
 * (Next.js adds it to its own) and what they load ('strict-dynamic'); no inline script without it.
 * Styles: 'unsafe-inline', because React renders `style` attributes (recharts sizes and colours
 * its SVG that way) and a nonce cannot cover an attribute; injected CSS cannot run code, and
 * scripts stay locked down. No framing, no plugins, forms post only here.
 */
export function contentSecurityPolicy(nonce: string, dev = process.env.NODE_ENV === "development"): string {
  return [
    "default-src 'self'",
    // The dev server's fast refresh evaluates code; a production build never needs eval.
    `script-src 'self' 'nonce-${nonce}' 'strict-dynamic'${dev ? " 'unsafe-eval'" : ""}`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}
