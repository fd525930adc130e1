import { operatorRoute } from "@/lib/http/operator";
import { retryJob, retryRequestSchema } from "@/lib/actions/retry";
import { describeRetry } from "@/lib/actions/retry-messages";

export const dynamic = "force-dynamic";

/** Operator: retry a job from its cursor (optionally with a larger budget). The API twin of the job page's Retry. */
export const POST = operatorRoute({
  name: "POST /api/jobs/:id/retry",
  action: "job.retry",
  input: { body: retryRequestSchema, example: '{} or { "budgetSoftS": 1200 }' },
  target: (_input, { id }: { id: string }) => id,
  run: (input, { principal, params }) => retryJob(params.id, principal, input),
  describe: describeRetry,
});
