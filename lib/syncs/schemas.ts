import { z } from "zod";
import { tenantSlugSchema } from "@/lib/tenants/slug";
import { FAMILIES } from "@/lib/ratelimit/buckets";

/** What a `marketplace_sync` job is asked to do (its `params`); the tenant is the job's own. */
export const syncParamsSchema = z.object({
  family: z.enum(FAMILIES, { error: `family must be one of ${FAMILIES.join(", ")}` }),
});
export type SyncParams = z.infer<typeof syncParamsSchema>;

/** The body of `POST /api/syncs`. */
export const syncRequestSchema = syncParamsSchema.extend({ tenant: tenantSlugSchema }).strict();
