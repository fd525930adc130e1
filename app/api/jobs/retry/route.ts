import { z } from "zod";
import { audited } from "@/lib/audit/audited";
import { errorResponse, route } from "@/lib/http/api";
import { readJsonBody } from "@/lib/http/body";
import { bulkRetryFilterSchema, previewBulkRetry, retryJobs, type BulkRetryResult } from "@/lib/jobs/bulk-retry";

type Outcome = { preview: Awaited<ReturnType<typeof previewBulkRetry>> } | { retry: BulkRetryResult } | null;

export const dynamic = "force-dynamic";

const bodySchema = z.object({ filter: bulkRetryFilterSchema.default({}), dryRun: z.boolean().default(false) }).strict();

/**
 * Operator: retry every job matching a filter. `{ "dryRun": true }` answers how many would be
 * retried (the preview to show before confirming); above 1,000 the retry is refused (422).
 */
export const POST = route(
  "public", // the role is checked by `audited`, so that a refusal is recorded too
  async (request) => {
    const body = await readJsonBody(request, '{ "filter": { "kind": "csv_import", "status": "timed_out" }, "dryRun": true }');
    const parsed = bodySchema.safeParse(body.ok ? body.value : undefined);
    const result = await audited<Outcome>(
      "operator",
      { action: parsed.success && parsed.data.dryRun ? "jobs.retry.preview" : "jobs.retry", params: parsed.success ? parsed.data.filter : { invalid: true } },
      async (principal) => {
        if (!parsed.success) return { result: "refused", message: "refused: invalid request", value: null };
        if (parsed.data.dryRun) {
          const preview = await previewBulkRetry(parsed.data.filter);
          return { result: "ok", message: `preview: ${preview.count} jobs match`, value: { preview } };
        }
        const r = await retryJobs(parsed.data.filter, principal);
        return { result: r.type === "done" ? "ok" : "refused", message: r.message, value: { retry: r } };
      },
    );
    if (!body.ok) throw body.error;
    if (!parsed.success) throw parsed.error;
    if (!result) throw parsed.error;
    if ("preview" in result) return Response.json(result.preview);
    const r = result.retry;
    if (r.type === "over_cap") return errorResponse(422, "too_many_jobs", r.message);
    return Response.json(r, { status: 202 });
  },
  "POST /api/jobs/retry",
);
