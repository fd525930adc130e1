import { operatorRoute } from "@/lib/http/operator";
import { planSplit, splitRequestSchema } from "@/lib/actions/split";
import { describeSplit } from "@/lib/actions/split-messages";

export const dynamic = "force-dynamic";

/** Operator: the proposed split of a job (`?parts=` to see another k), with its arithmetic. Changes nothing, so it is not audited. */
export const GET = operatorRoute({
  name: "GET /api/jobs/:id/split-plan",
  input: { query: splitRequestSchema.strip() },
  run: (input, { params }: { params: { id: string } }) => planSplit(params.id, input),
  describe: describeSplit,
});
