import { z } from "zod";
import { tenantSlugSchema } from "@/lib/imports/create-import";
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
export async function previewMarketplacePage(query: z.infer<typeof previewQuerySchema>, signal?: AbortSignal): Promise<MarketplacePageResult> {
  return fetchMarketplacePage({
    ...query,
    page: 1,
    signal,
    limiter: { acquire: (scope, options) => acquire(scope, { ...options, maxWaitMs: scaled(PREVIEW_MAX_WAIT_MS) }) },
  });
}
