import { formatCount } from "@/lib/format/number";
import { z } from "zod";
import { db, type Prisma } from "@/lib/db/client";
import type { Principal } from "@/lib/auth/roles";
import { JOB_KINDS } from "@/lib/catalog/catalog";
import { RETRYABLE_STATUSES } from "@/lib/jobs/reopen";
import { retryJob } from "./retry";
import { describeRetry } from "./retry-messages";

/** More than this many jobs in one bulk retry is refused: narrow the filter instead. */
export const BULK_RETRY_CAP = 1_000;

export const bulkRetryFilterSchema = z
  .object({
    kind: z.enum(JOB_KINDS).optional(),
    status: z.enum(RETRYABLE_STATUSES).optional(),
    tenant: z.string().trim().toLowerCase().max(63).optional(),
    /** Jobs created at or after this time (ISO 8601). */
    from: z.iso.datetime({ offset: true }).optional(),
    /** Jobs created before this time (ISO 8601). */
    to: z.iso.datetime({ offset: true }).optional(),
  })
  .strict();
export type BulkRetryFilter = z.infer<typeof bulkRetryFilterSchema>;

/** Without a status, a bulk retry leaves cancelled jobs alone: someone stopped them on purpose. */
const DEFAULT_BULK_STATUSES = RETRYABLE_STATUSES.filter((s) => s !== "cancelled");

function where(f: BulkRetryFilter): Prisma.JobWhereInput {
  return {
    status: f.status ? f.status : { in: DEFAULT_BULK_STATUSES },
    children: { none: {} },
    ...(f.kind ? { kind: f.kind } : {}),
    ...(f.tenant ? { tenant: { slug: f.tenant } } : {}),
    ...(f.from || f.to
      ? { createdAt: { ...(f.from ? { gte: new Date(f.from) } : {}), ...(f.to ? { lt: new Date(f.to) } : {}) } }
      : {}),
  };
}

/** How many jobs a bulk retry with this filter would retry: shown before confirming. */
export async function previewBulkRetry(
  filter: BulkRetryFilter,
): Promise<{ count: number; cap: number; overCap: boolean }> {
  const count = await db().job.count({ where: where(filter) });
  return { count, cap: BULK_RETRY_CAP, overCap: count > BULK_RETRY_CAP };
}

export type BulkRetryResult =
  | { type: "over_cap"; count: number; cap: number; message: string }
  | { type: "done"; matched: number; retried: number; refused: { jobId: string; reason: string }[]; message: string };

/**
 * Retries every job matching the filter, one `retryJob` each (so each is exactly-once and
 * resumes at its cursor); jobs that changed state meanwhile are refused individually with the
 * reason. Refused whole above the cap.
 */
export async function retryJobs(filter: BulkRetryFilter, by: Principal): Promise<BulkRetryResult> {
  const { count } = await previewBulkRetry(filter);
  if (count > BULK_RETRY_CAP) {
    return {
      type: "over_cap",
      count,
      cap: BULK_RETRY_CAP,
      message: `${formatCount(count)} jobs match; a bulk retry takes at most ${formatCount(BULK_RETRY_CAP)}. Narrow the filter (kind, tenant, time range) and retry in parts.`,
    };
  }
  const ids = await db().job.findMany({
    where: where(filter),
    select: { id: true },
    orderBy: { createdAt: "asc" },
    take: BULK_RETRY_CAP,
  });
  const refused: { jobId: string; reason: string }[] = [];
  let retried = 0;
  for (const { id } of ids) {
    const r = await retryJob(id, by);
    if (r.type === "retried") retried += 1;
    else refused.push({ jobId: id, reason: describeRetry(r).message });
  }
  return {
    type: "done",
    matched: ids.length,
    retried,
    refused,
    message: `Retried ${formatCount(retried)} of ${formatCount(ids.length)} matching jobs${refused.length ? `; ${refused.length} could not be retried` : ""}.`,
  };
}
