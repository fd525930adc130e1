import { z } from "zod";
import type { Prisma } from "@/lib/db/client";

/**
 * A part of a split job: items `from + 1 … to` of the job it was split from (1-based positions
 * in that job's batch). The part reads its items from that job's upload or files; its own cursor
 * counts from 0 to `to − from`.
 */
const partSchema = z.object({
  /** The job that was split (its upload or files hold the items). */
  of: z.uuid(),
  /** 1-based number of this part, and how many parts there are. */
  index: z.number().int().min(1),
  count: z.number().int().min(2),
  from: z.number().int().min(0),
  to: z.number().int().min(1),
});
export type Part = z.infer<typeof partSchema>;

/** The part a job's params describe, or null for a job that is not a part of a split. */
export function partOf(params: Prisma.JsonValue | null | undefined): Part | null {
  if (!params || typeof params !== "object" || Array.isArray(params) || !("part" in params)) return null;
  const parsed = partSchema.safeParse(params.part);
  return parsed.success ? parsed.data : null;
}

/** The job whose stored items a run reads: its own, or those of the job it is a part of. */
export function itemSourceOf(run: { jobId: string; params: Prisma.JsonValue | null }): string {
  return partOf(run.params)?.of ?? run.jobId;
}
