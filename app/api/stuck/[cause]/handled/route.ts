import { operatorRoute } from "@/lib/http/operator";
import { runStuckAction, stuckSelectionSchema } from "@/lib/actions/mark-failed";
import { describeStuckAction } from "@/lib/actions/stuck-messages";

export const dynamic = "force-dynamic";

/**
 * Operator: mark the selected jobs awaiting an operator handled (`POST /api/stuck/awaiting_operator/handled`):
 * a person dealt with them otherwise, so they leave the group, `bounded_jobs_awaiting_operator`
 * and its alert until they end again. The body names the jobs (`{ "jobIds": [...], "reason": "…" }`,
 * at most 1,000); an empty selection is a 400, never "every job". The API twin of the stuck page's button.
 */
export const POST = operatorRoute({
  name: "POST /api/stuck/:cause/handled",
  action: "stuck.handle",
  input: {
    body: stuckSelectionSchema,
    example: '{ "jobIds": ["<job id>"], "reason": "customer told to send a smaller file" }',
  },
  target: (_input, { cause }: { cause: string }) => cause,
  params: (input) => ({ jobIds: input.jobIds, count: input.jobIds.length, reason: input.reason ?? null }),
  run: (input, { principal, params }) => runStuckAction("handle", params.cause, input, principal),
  describe: describeStuckAction,
});
