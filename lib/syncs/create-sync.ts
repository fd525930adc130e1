import { db } from "@/lib/db/client";
import { createJob } from "@/lib/jobs/create";
import type { JobStatus } from "@/lib/core/job-statuses";
import { syncRequestSchema, type SyncParams } from "./schemas";

/**
 * The queue job id of a tenant's sync of one family: one per tenant and family, so a fan-out
 * that adds the same sync again while one is waiting in *delayed* or running is dropped by the
 * queue. (BullMQ accepts a `:` in a custom id only with exactly three parts; slugs have none.)
 */
export function syncQueueJobId(tenant: string, family: string): string {
  return `sync:${tenant}:${family}`;
}

export interface StartedSync {
  jobId: string;
  progressToken: string;
  status: JobStatus;
  /** True when an unfinished sync of the same tenant and family answered instead of a new one. */
  existing: boolean;
}

/**
 * Starts a `marketplace_sync` of one family for one tenant, or answers the one that is still
 * unfinished (queued, running or waiting for a rate-limit window): at most one per tenant and
 * family, decided under a lock on the pair, so two requests at once give one job. The body is
 * validated whole (a `ZodError` for bad fields) before anything is created.
 */
export async function startSync(body: unknown): Promise<StartedSync> {
  const { tenant, family } = syncRequestSchema.parse(body);
  const key = syncQueueJobId(tenant, family);
  const created = await createJob({
    kind: "marketplace_sync",
    tenantSlug: tenant,
    // Pages are unknown until the marketplace answers the last one.
    total: null,
    params: { family } satisfies SyncParams,
    queueJobId: key,
    onePerKey: {
      key,
      findOpen: (tx) =>
        tx.job.findFirst({
          where: {
            kind: "marketplace_sync",
            tenant: { slug: tenant },
            status: { in: ["queued", "running", "delayed"] },
            params: { path: ["family"], equals: family },
          },
          select: { id: true, progressToken: true, status: true },
          orderBy: { createdAt: "desc" },
        }),
    },
  });
  if (created.existing)
    return {
      jobId: created.jobId,
      progressToken: created.progressToken,
      status: created.existing.status,
      existing: true,
    };
  const row = await db().job.findUniqueOrThrow({ where: { id: created.jobId }, select: { status: true } });
  return { jobId: created.jobId, progressToken: created.progressToken, status: row.status, existing: false };
}
