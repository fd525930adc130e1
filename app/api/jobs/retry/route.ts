import { z } from "zod";
import { operatorRoute } from "@/lib/http/operator";
import { bulkRetryFilterSchema, previewBulkRetry, retryJobs } from "@/lib/actions/bulk-retry";
import { describeBulkRetry, type BulkRetryOutcome } from "@/lib/actions/bulk-retry-messages";

export const dynamic = "force-dynamic";

// The filter is required: an empty body must not mean "retry everything". Every retryable job is
// asked for explicitly, with `"filter": {}`.
const bodySchema = z.object({ filter: bulkRetryFilterSchema, dryRun: z.boolean().default(false) }).strict();

/**
 * Operator: retry every job matching a filter. `{ "dryRun": true }` answers how many would be
 * retried (the preview to show before confirming); above 1,000 the retry is refused (422).
 */
export const POST = operatorRoute({
  name: "POST /api/jobs/retry",
  action: (input) => (input?.dryRun ? "jobs.retry.preview" : "jobs.retry"),
  input: { body: bodySchema, example: '{ "filter": { "kind": "csv_import", "status": "timed_out" }, "dryRun": true }' },
  params: (input) => input.filter,
  run: async (input, { principal }): Promise<BulkRetryOutcome> =>
    input.dryRun ? { type: "preview", ...(await previewBulkRetry(input.filter)) } : retryJobs(input.filter, principal),
  describe: describeBulkRetry,
});
