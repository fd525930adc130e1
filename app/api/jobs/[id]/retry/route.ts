import { operatorRoute } from "@/lib/http/operator";
import { describeRetryOrReask, retryBodySchema, retryOrReask } from "@/lib/actions/retry-or-reask";

export const dynamic = "force-dynamic";

/**
 * Operator: retry a job from its cursor (optionally with a larger budget), or ask an import's rows
 * again on a chosen model provider (`route`, `rows`). The API twin of the job page's Retry and Re-ask.
 */
export const POST = operatorRoute({
  name: "POST /api/jobs/:id/retry",
  action: (input) => (input?.route === undefined ? "job.retry" : "job.reask"),
  input: {
    body: retryBodySchema,
    example: '{} or { "budgetSoftS": 1200 } or { "route": "primary", "rows": "fallback" }',
  },
  target: (_input, { id }: { id: string }) => id,
  run: (input, { principal, params }) => retryOrReask(params.id, principal, input),
  describe: describeRetryOrReask,
});
