import { parseQuery, route } from "@/lib/http/api";
import { ApiError } from "@/lib/http/errors";
import { previewMarketplacePage, previewQuerySchema } from "@/lib/syncs/preview";

export const dynamic = "force-dynamic";

/**
 * Viewer: `?tenant=&family=` → the first page of that tenant's data, read live through the
 * tenant's rate-limit bucket: `{ items, nextPage }`. When the bucket's next token is more than 5 s
 * (production) away: 429 with `Retry-After` — an HTTP request never waits a window out. 502 when
 * the marketplace fails.
 */
export const GET = route(
  "viewer",
  async (request) => {
    const query = parseQuery(request, previewQuerySchema);
    try {
      return Response.json(await previewMarketplacePage(query, request.signal));
    } catch (err) {
      if (err instanceof Error && err.name === "MarketplaceError") throw new ApiError(502, "marketplace_failed", `The marketplace could not be read: ${err.message}`);
      throw err;
    }
  },
  "GET /api/marketplace/preview",
);
