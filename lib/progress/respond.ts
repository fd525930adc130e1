import { errorResponse } from "@/lib/http/api";
import { subscribeToProgress } from "./hub";
import { ensureProgressListener } from "./listener";
import { getProgressSnapshot } from "./snapshot";

/** What an unknown progress link is answered, by the API and the stream alike. */
export const PROGRESS_NOT_FOUND = "No job has this progress link. Check the address.";

/**
 * Whether the caller already holds this answer: `If-None-Match` lists its ETag (or `*`). Weak
 * comparison, as RFC 9110 asks of If-None-Match, so a proxy's `W/` prefix still matches.
 */
function alreadyHeld(request: Request, etag: string): boolean {
  const header = request.headers.get("if-none-match");
  if (!header) return false;
  return header.split(",").some((tag) => {
    const t = tag.trim();
    return t === "*" || t.replace(/^W\//, "") === etag;
  });
}

/**
 * `GET /api/progress/:token`: the stored answer with its ETag; `304` without a body (and without
 * touching PostgreSQL) when the caller's copy is current. Browsers and proxies must ask again
 * every time (`no-cache`), never keep it (`private`: the link is the key).
 */
export async function progressResponse(request: Request, token: string): Promise<Response> {
  void ensureProgressListener();
  // The subscription lets this process keep copies of answers; a request never waits for it.
  subscribeToProgress().catch(() => undefined);
  const snapshot = await getProgressSnapshot(token);
  if (!snapshot) return errorResponse(404, "not_found", PROGRESS_NOT_FOUND);
  const headers = { ETag: snapshot.etag, "Cache-Control": "private, no-cache" };
  if (alreadyHeld(request, snapshot.etag)) return new Response(null, { status: 304, headers });
  return new Response(snapshot.body, { headers: { ...headers, "Content-Type": "application/json" } });
}
