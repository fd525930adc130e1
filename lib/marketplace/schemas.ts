import { z } from "zod";
import { dateProblem, textProblem } from "@/lib/db/storable";

/**
 * One record of a marketplace endpoint family. `value` is the family's headline number:
 * statistics — views of the day, orders — order amount in cents, ads — spend in cents.
 */
const marketplaceItemSchema = z.object({
  id: z
    .string()
    .min(1)
    .max(200)
    .superRefine((s, ctx) => {
      const problem = textProblem(s);
      if (problem) ctx.addIssue({ code: "custom", message: `id ${problem}` });
    }),
  date: z.iso.date().superRefine((s, ctx) => {
    const problem = dateProblem(s);
    if (problem) ctx.addIssue({ code: "custom", message: `date ${s} ${problem}` });
  }),
  value: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
});
export type MarketplaceItem = z.infer<typeof marketplaceItemSchema>;

/**
 * The records of a page the database can store, and why each other one cannot ("record 3: id
 * contains a NUL character"): one bad record is its page's problem, never the sync's.
 */
export function storableRecords(items: readonly unknown[]): { items: MarketplaceItem[]; refused: string[] } {
  const ok: MarketplaceItem[] = [];
  const refused: string[] = [];
  items.forEach((item, i) => {
    const parsed = marketplaceItemSchema.safeParse(item);
    if (parsed.success) ok.push(parsed.data);
    else
      refused.push(
        `record ${i + 1}: ${parsed.error.issues[0]?.path.join(".") ? `${parsed.error.issues[0]!.path.join(".")}: ` : ""}${parsed.error.issues[0]?.message ?? "invalid"}`,
      );
  });
  return { items: ok, refused };
}

/** `GET {MARKETPLACE_BASE_URL}/{family}?tenant=…&page=…` (pages count from 1); records are checked one by one (`storableRecords`). */
export const marketplacePageSchema = z.object({
  items: z.array(z.unknown()),
  page: z.number().int().positive(),
  /** The next page to ask for, or null after the last page. */
  nextPage: z.number().int().positive().nullable(),
});
export type MarketplacePage = z.infer<typeof marketplacePageSchema>;
