import { operatorRoute } from "@/lib/http/operator";
import { bulkReask, bulkReaskSchema, describeBulkReask } from "@/lib/reasks/bulk";

export const dynamic = "force-dynamic";

/**
 * Operator: ask the rows of every ended import matching a filter again on one provider
 * (`{ "filter": { tenant?, from?, to? }, "route": "primary", "rows": "fallback", "dryRun": true }`);
 * the dry run says how many imports it would take. At most 100 imports at once.
 */
export const POST = operatorRoute({
  name: "POST /api/jobs/reask",
  action: (input) => (input?.dryRun ? "jobs.reask.preview" : "jobs.reask"),
  input: {
    body: bulkReaskSchema,
    example: '{ "filter": { "tenant": "acme" }, "route": "primary", "rows": "fallback", "dryRun": true }',
  },
  run: (input, { principal }) => bulkReask(input, principal),
  describe: describeBulkReask,
});
