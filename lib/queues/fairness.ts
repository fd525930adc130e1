import { db } from "@/lib/db/client";
import { OPEN_STATUSES } from "@/lib/core/job-statuses";
import type { QueueName } from "@/lib/catalog/catalog";

/**
 * Fairness between tenants in a shared queue, as BullMQ priorities.
 *
 * BullMQ (open source) serves its plain wait list first, then prioritized jobs by the lowest
 * number, first in first out within one number (the order of `add`). Every queue job of Bounded
 * carries a priority, so the plain list only ever holds jobs BullMQ itself puts back there (see
 * below), and the priority number alone decides who runs next:
 *
 * - a retry of a job that ended without finishing (timed out, killed, failed, abandoned) gets
 *   `RETRY_PRIORITY` (1): it already waited its turn once, and a person is waiting for it;
 * - every other job gets 1 + the number of its tenant's open rows (queued, running, delayed) in
 *   that queue, itself included: a tenant's first open job 2, its second 3, and so on.
 *
 * So the queue serves tenants in turn — every tenant's 1st job, then every tenant's 2nd — and a
 * tenant with 95 files queued delays another tenant's first job by at most one job (its
 * own first, added earlier with the same number), besides what the workers already run. A part
 * of a split job counts its open parent (and its open siblings), so it never ties with another
 * tenant's first job or with a retry.
 *
 * The number is a place in line taken when the job is added, not re-sorted later: a job keeps
 * its number while its tenant's earlier jobs finish, so it can wait behind smaller numbers of
 * jobs added after it — the price of one count per add instead of a re-numbering of the queue
 * (BullMQ's `changePriority` could do that, should it ever matter). Two jobs of one tenant added
 * at the same instant may count the same rows and tie; a tie is served first in, first out.
 *
 * What BullMQ does with the number later (checked against bullmq 6.7.0's scripts, and by
 * ./fairness.integration.test.ts):
 * - a job the reschedule policy moves to *delayed* keeps its priority: when its delay ends it goes
 *   back among the prioritized jobs with the same number, behind the jobs already waiting with it;
 * - a stalled job (its worker died) goes back to the plain wait list, ahead of every prioritized
 *   job: it had its turn already, and resumes at its cursor like a retry.
 *
 * Why priorities, and not:
 * - BullMQ Pro groups (round-robin per group, built in): a paid licence and another client;
 * - a dispatcher (one queue per tenant, a process that feeds the shared queue in turn): one more
 *   process to keep alive, and a job row and its queue entry would no longer exist together;
 * - per-tenant slot caps (at most k running jobs per tenant): they leave workers idle when only
 *   one tenant has work, and still serve the rest of the queue first in, first out.
 * A priority costs nothing at run time (one count when the job is added) and wastes no capacity:
 * a lone tenant's backlog runs at full speed.
 */

/** The priority of a retry: before every fresh job of every tenant. */
export const RETRY_PRIORITY = 1;
/** The largest priority BullMQ accepts (2^21). A tenant with more open jobs than that waits last, in order. */
export const MAX_PRIORITY = 2_097_152;

/** The priority a fresh job gets when its tenant has `openRows` open rows in its queue, itself included. */
export function priorityForOpenRows(openRows: number): number {
  // At least 2, whatever the count: a fresh job never ties with a retry.
  return Math.min(MAX_PRIORITY, Math.max(RETRY_PRIORITY + 1, 1 + Math.floor(openRows)));
}

/**
 * The priority of a fresh queue job of `tenantId` on `queue`: its place in its tenant's line.
 * Call it after the job's row is committed (the row counts itself). Retries use `RETRY_PRIORITY`.
 */
export async function tenantPriority(queue: QueueName, tenantId: string): Promise<number> {
  const openRows = await db().job.count({ where: { tenantId, queue, status: { in: [...OPEN_STATUSES] } } });
  return priorityForOpenRows(openRows);
}
