import { z } from "zod";
import { createJob } from "@/lib/jobs/create";
import { dislikeRetryUsed, ensureAd } from "@/lib/quota/ads";
import { QuotaRefused } from "@/lib/quota/errors";

/** `POST /api/generations`: what the product's own services send to have a card generated. */
export const generationRequestSchema = z
  .object({
    tenant: z
      .string()
      .trim()
      .min(1, "tenant is required")
      .max(63)
      .regex(/^[a-z0-9][a-z0-9-]*$/, "tenant must be lower-case letters, digits and dashes"),
    adId: z.uuid("adId must be a UUID"),
    kind: z.enum(["generate", "dislike"], "kind must be generate or dislike"),
  })
  .strict();
export type GenerationRequest = z.infer<typeof generationRequestSchema>;

/** What a card_generation job is asked to do (its `params`). */
export const generationParamsSchema = generationRequestSchema.pick({ adId: true, kind: true });

/**
 * Starts a `card_generation` for an ad. What can be known now is refused now, with nothing
 * created (`QuotaRefused`): another tenant's ad, no pack or an empty one, a dislike of an ad
 * without a card, a dislike already running or already delivered. The unit itself is claimed by
 * the worker when the generation starts, which checks all of it again, atomically.
 */
export async function createGeneration(body: unknown): Promise<{ jobId: string; progressToken: string }> {
  const { tenant, adId, kind } = generationRequestSchema.parse(body);
  return createJob({
    kind: "card_generation",
    tenantSlug: tenant,
    total: 1,
    params: { adId, kind },
    extra: async (tx, jobId) => {
      const job = await tx.job.findUniqueOrThrow({ where: { id: jobId }, select: { tenantId: true } });
      const ad =
        kind === "generate"
          ? await ensureAd(job.tenantId, adId, tx)
          : await tx.ad.findFirst({ where: { id: adId, tenantId: job.tenantId }, select: { id: true } });
      if (!ad) throw new QuotaRefused({ code: "ad_not_found", adId });
      const pack = await tx.quotaPack.findUnique({
        where: { tenantId: job.tenantId },
        select: { size: true, remaining: true },
      });
      if (!pack) throw new QuotaRefused({ code: "no_pack", tenant });
      if (pack.remaining <= 0) throw new QuotaRefused({ code: "pack_empty", tenant, size: pack.size });
      if (kind === "dislike") {
        if ((await tx.cardImage.count({ where: { adId } })) === 0)
          throw new QuotaRefused({ code: "nothing_to_dislike", adId });
        if (await dislikeRetryUsed(adId, tx)) throw new QuotaRefused({ code: "dislike_in_progress", adId });
        if ((await tx.cardImage.count({ where: { adId, kind: "dislike" } })) > 0)
          throw new QuotaRefused({ code: "dislike_already_used", adId });
      }
    },
  });
}
