import { operatorRoute } from "@/lib/http/operator";
import { runStuckAction, stuckSelectionSchema } from "@/lib/actions/mark-failed";
import { describeStuckAction } from "@/lib/actions/stuck-messages";

export const dynamic = "force-dynamic";

/**
 * Operator: retry the selected jobs awaiting an operator (`POST /api/stuck/awaiting_operator/retry`), each from its cursor. The body names the jobs (`{ "jobIds": [...] }`, at most 1,000); an empty
 * selection is a 400, never "every job". The API twin of the stuck page's button.
 */
export const POST = operatorRoute({
  name: "POST /api/stuck/:cause/retry",
  action: "stuck.retry",
  input: { body: stuckSelectionSchema, example: '{ "jobIds": ["<job id>"], "reason": "worker host lost" }' },
  target: (_input, { cause }: { cause: string }) => cause,
  params: (input) => ({ jobIds: input.jobIds, count: input.jobIds.length, reason: input.reason ?? null }),
  run: (input, { principal, params }) => runStuckAction("retry", params.cause, input, principal),
  describe: describeStuckAction,
});
