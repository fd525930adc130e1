import { operatorRoute } from "@/lib/http/operator";
import { runStuckAction, stuckSelectionSchema } from "@/lib/actions/mark-failed";
import { describeStuckAction } from "@/lib/actions/stuck-messages";

export const dynamic = "force-dynamic";

/**
 * Operator: mark the selected jobs of an open stuck group failed (who and why in each job's message). The body names the jobs (`{ "jobIds": [...] }`, at most 1,000); an empty
 * selection is a 400, never "every job". The API twin of the stuck page's button.
 */
export const POST = operatorRoute({
  name: "POST /api/stuck/:cause/fail",
  action: "stuck.fail",
  input: { body: stuckSelectionSchema, example: '{ "jobIds": ["<job id>"], "reason": "worker host lost" }' },
  target: (_input, { cause }: { cause: string }) => cause,
  params: (input) => ({ jobIds: input.jobIds, count: input.jobIds.length, reason: input.reason ?? null }),
  run: (input, { principal, params }) => runStuckAction("fail", params.cause, input, principal),
  describe: describeStuckAction,
});
