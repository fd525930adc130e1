import { db } from "@/lib/db/client";
import { ItemError, JobFailed } from "@/lib/core/signals";
import { forEachItem } from "@/lib/runs/for-each-item";
import { countLabel } from "@/lib/jobs/messages";
import { fetchMarketplacePage, type MarketplacePageResult } from "@/lib/marketplace/client";
import type { MarketplaceItem } from "@/lib/marketplace/schemas";
import { syncParamsSchema } from "@/lib/syncs/schemas";
import type { Processor } from "@/lib/runs/processor";

interface FetchedPage {
  page: number;
  items: MarketplaceItem[];
  /** Records of the page the database cannot store: the page fails with their reasons, the sync goes on. */
  refused: string[];
  last: boolean;
}

/**
 * `marketplace_sync`: every page of one endpoint family for the job's tenant, one page per item.
 * A page's records (upserted by tenant, family and the marketplace's id, so a page written again
 * never makes a second row) and the cursor advance commit in one transaction, fenced by the
 * attempt: a run that was rescheduled, handed back or killed resumes at the page after the last
 * one committed, and pages already written are never asked for again. The number of pages is
 * known when the marketplace answers the last one (`nextPage: null`); it becomes the job's total.
 *
 * Each request takes a token from the tenant's bucket first; a long wait for it leaves this
 * function as `RateLimitDefer`, which the queue wrapper turns into a reschedule.
 */
export const marketplaceSync: Processor = async ({ run, loop, signal }) => {
  const params = syncParamsSchema.safeParse(run.params);
  if (!params.success)
    throw new JobFailed(
      `This sync cannot run: ${params.error.issues[0]?.message ?? "its parameters are invalid"}. Start a new sync.`,
    );
  const { family } = params.data;
  const { slug: tenant } = await db().tenant.findUniqueOrThrow({ where: { id: run.tenantId }, select: { slug: true } });
  // A run that committed the last page but ended before finalizing has nothing left to fetch.
  const finished = run.total !== null && loop.cursor >= run.total;

  async function* pages(): AsyncGenerator<FetchedPage | null> {
    // Pages count from 1, like the cursor's items: the ones already committed are skipped by
    // forEachItem without being fetched again.
    for (let i = 1; i <= loop.cursor; i++) yield null;
    if (finished) return;
    let page: number | null = loop.cursor + 1;
    while (page !== null) {
      let result: MarketplacePageResult;
      try {
        result = await fetchMarketplacePage({ family, tenant, page, signal });
      } catch (err) {
        if (err instanceof Error && err.name === "MarketplaceError") {
          // Without this page there is no next one to ask for: the job stops here, resumable.
          throw new JobFailed(
            `Could not read page ${page} of ${family}: ${err.message}. Retry to resume at this page.`,
          );
        }
        throw err;
      }
      yield { page, items: result.items, refused: result.refused, last: result.nextPage === null };
      page = result.nextPage;
    }
  }

  await forEachItem(loop, pages(), async (fetched, { index }) => {
    if (!fetched) return null;
    if (fetched.refused.length > 0) {
      throw new ItemError(
        `page ${fetched.page}: ${countLabel(fetched.refused.length, "record")} could not be stored (${fetched.refused.slice(0, 3).join("; ")})`,
      );
    }
    return async (tx) => {
      if (fetched.items.length > 0) {
        await tx.$executeRaw`
          INSERT INTO "MarketplaceRecord" ("tenantId", family, "externalId", data, "jobId", page, "syncedAt")
          SELECT ${run.tenantId}::uuid, ${family}, r->>'id', r, ${run.jobId}::uuid, ${fetched.page}, now() AT TIME ZONE 'UTC'
          FROM jsonb_array_elements(${JSON.stringify(fetched.items)}::jsonb) AS r
          ON CONFLICT ("tenantId", family, "externalId") DO UPDATE
            SET data = EXCLUDED.data, "jobId" = EXCLUDED."jobId", page = EXCLUDED.page, "syncedAt" = EXCLUDED."syncedAt"`;
      }
      if (fetched.last) await tx.job.update({ where: { id: run.jobId }, data: { total: index } });
    };
  });

  return {
    message: (row) =>
      row.failed === 0
        ? `Synced all ${countLabel(row.processed, "page")} of ${family} for ${tenant}.`
        : `Synced ${countLabel(row.processed, "page")} of ${family} for ${tenant}; ${countLabel(row.failed, "page")} could not be written (see the list).`,
  };
};
