import { operatorRoute } from "@/lib/http/operator";
import { splitJob, splitRequestSchema } from "@/lib/actions/split";
import { describeSplit } from "@/lib/actions/split-messages";

export const dynamic = "force-dynamic";

/** Operator: split a job's remaining items into parts (`{ parts? }`, 2–50). The API twin of the job page's Split. */
export const POST = operatorRoute({
  name: "POST /api/jobs/:id/split",
  action: "job.split",
  input: { body: splitRequestSchema, example: '{} or { "parts": 8 }' },
  target: (_input, { id }: { id: string }) => id,
  params: (input) => ({ parts: input.parts ?? null }),
  run: (input, { principal, params }) => splitJob(params.id, principal, input),
  describe: describeSplit,
});
