import { z } from "zod";
import { db } from "@/lib/db/client";
import { tenantSlugSchema } from "@/lib/tenants/slug";
import { fetchMarketplacePage, type MarketplacePageResult } from "@/lib/marketplace/client";
import { FAMILIES } from "@/lib/ratelimit/buckets";
import { acquire } from "@/lib/ratelimit/limiter";
import { scaled } from "@/lib/time";

/**
 * How long a person waiting on a preview request may wait for the tenant's token (production
 * ms): beyond it there is no "later" for an HTTP call — the answer is 429 with Retry-After.
 */
const PREVIEW_MAX_WAIT_MS = 5_000;

export const previewQuerySchema = z.object({
  tenant: tenantSlugSchema,
  family: z.enum(FAMILIES, { error: `family must be one of ${FAMILIES.join(", ")}` }),
});

/**
 * The first page of a tenant's data in one family, read live — through the same limiter as the
 * syncs, so a preview takes the tenant's token like any request. Outside a job: a wait longer
 * than `PREVIEW_MAX_WAIT_MS` throws `RateLimitCapExceeded` (an HTTP 429 with Retry-After).
 */
export async function previewMarketplacePage(
  query: z.infer<typeof previewQuerySchema>,
  signal?: AbortSignal,
): Promise<MarketplacePageResult> {
  return fetchMarketplacePage({
    ...query,
    page: 1,
    signal,
    limiter: { acquire: (scope, options) => acquire(scope, { ...options, maxWaitMs: scaled(PREVIEW_MAX_WAIT_MS) }) },
  });
}

/** A page size like the marketplace's: what one live preview shows. */
const SYNCED_PREVIEW_ITEMS = 20;

export interface SyncedPreview {
  items: MarketplacePageResult["items"];
  nextPage: null;
  /** Where the items come from: what the tenant's last sync stored, as of `syncedAt` (null: never synced). */
  source: "last_sync";
  syncedAt: string | null;
}

/**
 * The first page of a tenant's data as its last sync stored it: no marketplace call, so no token
 * of the tenant's bucket. This is a viewer's preview. A separate bucket would not do: the
 * marketplace's limit is the tenant's own quota there, so every live call — whoever's bucket on
 * our side paid for it — is a call the tenant's syncs cannot make; a short cache still calls on
 * every miss. A viewer reading pages should never delay a sync.
 */
export async function syncedMarketplacePage(query: z.infer<typeof previewQuerySchema>): Promise<SyncedPreview> {
  const rows = await db().marketplaceRecord.findMany({
    where: { family: query.family, tenant: { slug: query.tenant } },
    orderBy: [{ page: "asc" }, { externalId: "asc" }],
    take: SYNCED_PREVIEW_ITEMS,
    select: { data: true, syncedAt: true },
  });
  const syncedAt = rows.reduce<Date | null>(
    (latest, r) => (!latest || r.syncedAt > latest ? r.syncedAt : latest),
    null,
  );
  return {
    items: rows.map((r) => r.data as MarketplacePageResult["items"][number]),
    nextPage: null,
    source: "last_sync",
    syncedAt: syncedAt?.toISOString() ?? null,
  };
}
