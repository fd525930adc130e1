import { createJob } from "@/lib/jobs/create";
import type { QueueName } from "@/lib/catalog/catalog";
import { agentRunRequestSchema, type AgentRunParams } from "./schemas";

/**
 * Starts an `agent_run`: one item per step. An interactive run (a person is waiting) goes to the
 * `agent-interactive` queue and its tight budget, any other to `agent-batch`. The body is
 * validated whole (a `ZodError` for bad fields) before anything is created.
 */
export async function createAgentRun(
  body: unknown,
): Promise<{ jobId: string; progressToken: string; queue: QueueName; steps: number }> {
  const { tenant, ...params } = agentRunRequestSchema.parse(body);
  const queue: QueueName = params.interactive ? "agent-interactive" : "agent-batch";
  const { jobId, progressToken } = await createJob({
    kind: "agent_run",
    queue,
    tenantSlug: tenant,
    total: params.steps,
    params: params satisfies AgentRunParams,
  });
  return { jobId, progressToken, queue, steps: params.steps };
}
