import { db, type Prisma } from "@/lib/db/client";

/**
 * The ad row Bounded keeps for a card: created on the first generation requested for it (the ad
 * itself lives in the product, which names it by id). Null when the id belongs to another
 * tenant's ad: one tenant can never generate, or dislike, another's card.
 */
export async function ensureAd(
  tenantId: string,
  adId: string,
  tx: Prisma.TransactionClient = db(),
): Promise<{ id: string } | null> {
  await tx.$executeRaw`INSERT INTO "Ad" (id, "tenantId", params) VALUES (${adId}::uuid, ${tenantId}::uuid, '{}'::jsonb) ON CONFLICT (id) DO NOTHING`;
  return tx.ad.findFirst({ where: { id: adId, tenantId }, select: { id: true } });
}

/** The ad's `aiDislikeRetryUsed` flag: true exactly while a dislike regeneration holds a reserve. */
export async function dislikeRetryUsed(adId: string, tx: Prisma.TransactionClient = db()): Promise<boolean> {
  const ad = await tx.ad.findUnique({ where: { id: adId }, select: { params: true } });
  const params = ad?.params;
  return (
    typeof params === "object" &&
    params !== null &&
    !Array.isArray(params) &&
    (params as Record<string, unknown>).aiDislikeRetryUsed === true
  );
}
