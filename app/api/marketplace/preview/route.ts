import { hasRole } from "@/lib/auth/roles";
import { parseQuery, route } from "@/lib/http/api";
import { ApiError } from "@/lib/http/errors";
import { previewMarketplacePage, previewQuerySchema, syncedMarketplacePage } from "@/lib/syncs/preview";

export const dynamic = "force-dynamic";

/**
 * Viewer: `?tenant=&family=` → the first page of that tenant's data: `{ items, nextPage }`.
 * A viewer gets what the tenant's last sync stored (`source: "last_sync"`, `syncedAt`), which
 * spends none of the tenant's marketplace quota. An operator gets it live through the tenant's
 * rate-limit bucket, like a sync: when the bucket's next token is more than 5 s (production) away,
 * 429 with `Retry-After` — an HTTP request never waits a window out; 502 when the marketplace fails.
 */
export const GET = route(
  "viewer",
  async (request, _ctx, principal) => {
    const query = parseQuery(request, previewQuerySchema);
    if (!principal || !hasRole(principal, "operator")) return Response.json(await syncedMarketplacePage(query));
    try {
      return Response.json(await previewMarketplacePage(query, request.signal));
    } catch (err) {
      if (err instanceof Error && err.name === "MarketplaceError")
        throw new ApiError(502, "marketplace_failed", `The marketplace could not be read: ${err.message}`);
      throw err;
    }
  },
  "GET /api/marketplace/preview",
);
