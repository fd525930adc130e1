import { createAgentRun } from "@/lib/agents/create-run";
import { agentRunRequestSchema } from "@/lib/agents/schemas";
import { audited } from "@/lib/audit/audited";
import { readJsonBody } from "@/lib/http/body";
import { route } from "@/lib/http/api";
import { ApiError } from "@/lib/http/errors";
import { EnqueueFailed } from "@/lib/jobs/create";

export const dynamic = "force-dynamic";

/**
 * Operator (what the product's own services call): JSON `{ tenant, task, steps (1–50),
 * interactive? }` → 201 { jobId, progressToken, progressUrl, queue }. Interactive runs go to
 * `agent-interactive`, the others to `agent-batch`. Every call is audited, refusals included.
 */
export const POST = route(
  "public", // the role is checked by `audited`, so that a refusal is recorded too
  async (request) => {
    const body = await readJsonBody(request, '{ "tenant": "acme", "task": "…", "steps": 5, "interactive": true }');
    const parsed = agentRunRequestSchema.safeParse(body.ok ? body.value : undefined);
    const run = await audited(
      "operator",
      { action: "agent_run.start", target: parsed.success ? parsed.data.tenant : null, params: parsed.success ? { steps: parsed.data.steps, interactive: parsed.data.interactive ?? false } : { invalid: true } },
      async () => {
        if (!parsed.success) return { result: "refused", message: "refused: invalid request", value: null };
        try {
          const r = await createAgentRun(parsed.data);
          return { result: "ok", message: `agent_run ${r.jobId} queued on ${r.queue}`, value: r };
        } catch (err) {
          if (!(err instanceof EnqueueFailed)) throw err;
          return { result: "error", message: `failed: ${err.message}`, value: null };
        }
      },
    );
    if (!body.ok) throw body.error;
    if (!parsed.success) throw parsed.error;
    if (!run) throw new ApiError(503, "queue_unavailable", "The agent run cannot be started right now (the job queue is unavailable). Nothing was saved; try again in a minute.");
    const progressUrl = `/progress/${run.progressToken}`;
    return Response.json({ jobId: run.jobId, progressToken: run.progressToken, progressUrl, queue: run.queue, steps: run.steps }, { status: 201, headers: { Location: progressUrl } });
  },
  "POST /api/agent-runs",
);
