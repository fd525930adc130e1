import type { JobStatus } from "@/lib/core/job-statuses";

/**
 * The one record of a job the stuck and awaiting-operator reports list: who, what, how far, and
 * its budget. Each report adds its own fields (why it is stuck, what continues it). A row of the
 * jobs list is another record, `JobListItem` (lib/job-views/queries.ts).
 */
export interface JobSummary {
  id: string;
  kind: string;
  queue: string;
  tenant: string;
  status: JobStatus;
  attempt: number;
  total: number | null;
  processed: number;
  failed: number;
  createdAt: string;
  budgetSoftMs: number;
  budgetHardMs: number;
}

/** The same fields as the reports' SQL reads them (times as dates). */
export type JobSummaryRow = Omit<JobSummary, "createdAt"> & { createdAt: Date };

/** The summary of a row the reports read. */
export function summaryOf(r: JobSummaryRow): JobSummary {
  return {
    id: r.id,
    kind: r.kind,
    queue: r.queue,
    tenant: r.tenant,
    status: r.status,
    attempt: r.attempt,
    total: r.total,
    processed: r.processed,
    failed: r.failed,
    createdAt: r.createdAt.toISOString(),
    budgetSoftMs: r.budgetSoftMs,
    budgetHardMs: r.budgetHardMs,
  };
}

/** Only the summary's fields of a richer record (so a report's extra fields do not leak into another's). */
export function summaryFields(j: JobSummary): JobSummary {
  const { id, kind, queue, tenant, status, attempt, total, processed, failed, createdAt, budgetSoftMs, budgetHardMs } =
    j;
  return { id, kind, queue, tenant, status, attempt, total, processed, failed, createdAt, budgetSoftMs, budgetHardMs };
}
