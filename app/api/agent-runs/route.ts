import { createAgentRun } from "@/lib/agents/create-run";
import { agentRunRequestSchema } from "@/lib/agents/schemas";
import { operatorRoute } from "@/lib/http/operator";
import { describeJobStarted, describeQueueUnavailable, startOrQueueUnavailable } from "@/lib/jobs/start-outcome";

export const dynamic = "force-dynamic";

/**
 * Operator (what the product's own services call): JSON `{ tenant, task, steps (1–50),
 * interactive? }` → 201 { jobId, progressToken, progressUrl, queue }. Interactive runs go to
 * `agent-interactive`, the others to `agent-batch`. Every call is audited, refusals included.
 */
export const POST = operatorRoute({
  name: "POST /api/agent-runs",
  action: "agent_run.start",
  input: { body: agentRunRequestSchema, example: '{ "tenant": "acme", "task": "…", "steps": 5, "interactive": true }' },
  target: (input) => input?.tenant ?? null,
  // The audit keeps the shape of the run, not its task text.
  params: (input) => ({ steps: input.steps, interactive: input.interactive ?? false }),
  run: (input) => startOrQueueUnavailable(createAgentRun(input)),
  describe: (r) => {
    if (r.type === "queue_unavailable") return describeQueueUnavailable(r, "agent run");
    const run = r.started;
    return describeJobStarted(run, `agent_run ${run.jobId} queued on ${run.queue}`, {
      queue: run.queue,
      steps: run.steps,
    });
  },
});
