import { z } from "zod";
import { db } from "@/lib/db/client";
import { formatDays } from "@/lib/format/duration";
import type { Described } from "@/lib/http/operator";

/**
 * How long a tenant keeps its own results (its imports' transactions, its stored category answers)
 * after the job that made them ended: its choice, not a platform default. Null keeps them until
 * the tenant is deleted. The retention pass (./jobs.ts `pruneTenantResults`) acts on it.
 */
export const tenantRetentionSchema = z.strictObject({
  /** Days, fractions allowed; null: kept until the tenant is deleted. */
  resultsDays: z.number().positive().max(36_500).nullable(),
});

export type TenantRetentionResult =
  | { type: "not_found"; tenant: string }
  | { type: "set"; tenant: string; resultsDays: number | null };

export async function setTenantRetention(
  slug: string,
  input: z.output<typeof tenantRetentionSchema>,
): Promise<TenantRetentionResult> {
  const { count } = await db().tenant.updateMany({ where: { slug }, data: { resultsRetainDays: input.resultsDays } });
  if (count === 0) return { type: "not_found", tenant: slug };
  return { type: "set", tenant: slug, resultsDays: input.resultsDays };
}

export function describeTenantRetention(r: TenantRetentionResult): Described {
  if (r.type === "not_found")
    return { ok: false, status: 404, code: "not_found", message: `No tenant is named “${r.tenant}”.` };
  return {
    ok: true,
    status: 200,
    code: "set",
    message:
      r.resultsDays === null
        ? `${r.tenant} keeps its results until it is deleted.`
        : `${r.tenant} keeps its results ${formatDays(r.resultsDays)} after the job that made them ended; older ones are removed by the next retention pass.`,
  };
}
