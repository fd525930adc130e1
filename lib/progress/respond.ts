import { errorResponse } from "@/lib/http/api";
import { progressLinkNotFoundMessage } from "@/lib/jobs/messages";
import { subscribeToProgress } from "./hub";
import { ensureProgressListener } from "./listener";
import { getProgressSnapshot, type ProgressSnapshot } from "./snapshot";

/**
 * Whether the caller already holds this answer: `If-None-Match` lists its ETag (or `*`). Weak
 * comparison, as RFC 9110 asks of If-None-Match, so a proxy's `W/` prefix still matches.
 */
function alreadyHeld(ifNoneMatch: string | null | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(",").some((tag) => {
    const t = tag.trim();
    return t === "*" || t.replace(/^W\//, "") === etag;
  });
}

/** A stored answer as the caller gets it: status, headers and body (none for a 304). */
export interface ProgressAnswer {
  status: 200 | 304;
  headers: Record<string, string>;
  body: string | null;
}

/**
 * The answer to a poll of a stored snapshot, wherever it is answered (the route handler below, or
 * ./front-door.ts before the framework): `304` without a body when the caller's copy is current.
 * Browsers and proxies must ask again every time (`no-cache`), never keep it (`private`: the link
 * is the key).
 */
export function progressAnswer(snapshot: ProgressSnapshot, ifNoneMatch: string | null | undefined): ProgressAnswer {
  const headers = { ETag: snapshot.etag, "Cache-Control": "private, no-cache" };
  if (alreadyHeld(ifNoneMatch, snapshot.etag)) return { status: 304, headers, body: null };
  return { status: 200, headers: { ...headers, "Content-Type": "application/json" }, body: snapshot.body };
}

/**
 * `GET /api/progress/:token`: the stored answer with its ETag (`progressAnswer`), without touching
 * PostgreSQL unless the job has no answer stored yet.
 */
export async function progressResponse(request: Request, token: string): Promise<Response> {
  void ensureProgressListener();
  // The subscription lets this process keep copies of answers; a request never waits for it.
  subscribeToProgress().catch(() => undefined);
  const snapshot = await getProgressSnapshot(token);
  if (!snapshot) return errorResponse(404, "not_found", progressLinkNotFoundMessage());
  const answer = progressAnswer(snapshot, request.headers.get("if-none-match"));
  return new Response(answer.body, { status: answer.status, headers: answer.headers });
}
