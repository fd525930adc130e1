import { z } from "zod";

/**
 * One record of a marketplace endpoint family. `value` is the family's headline number:
 * statistics — views of the day, orders — order amount in cents, ads — spend in cents.
 */
const marketplaceItemSchema = z.object({
  id: z.string().min(1),
  date: z.iso.date(),
  value: z.number().int().nonnegative(),
});
export type MarketplaceItem = z.infer<typeof marketplaceItemSchema>;

/** `GET {MARKETPLACE_BASE_URL}/{family}?tenant=…&page=…` (pages count from 1). */
export const marketplacePageSchema = z.object({
  items: z.array(marketplaceItemSchema),
  page: z.number().int().positive(),
  /** The next page to ask for, or null after the last page. */
  nextPage: z.number().int().positive().nullable(),
});
export type MarketplacePage = z.infer<typeof marketplacePageSchema>;
