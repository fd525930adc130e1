import { operatorRoute } from "@/lib/http/operator";
import { cancelJob, cancelRequestSchema, describeCancel } from "@/lib/actions/cancel";

export const dynamic = "force-dynamic";

/** Operator: cancel a queued or running job (a running one stops before its next item, its progress kept). The API twin of the job page's Cancel. */
export const POST = operatorRoute({
  name: "POST /api/jobs/:id/cancel",
  action: "job.cancel",
  input: { body: cancelRequestSchema, example: '{} or { "reason": "wrong file uploaded" }' },
  target: (_input, { id }: { id: string }) => id,
  run: (input, { principal, params }) => cancelJob(params.id, principal, input),
  describe: describeCancel,
});
