import { createAgentRun } from "@/lib/agents/create-run";
import { route } from "@/lib/http/api";
import { ApiError } from "@/lib/http/errors";
import { EnqueueFailed } from "@/lib/jobs/create";

export const dynamic = "force-dynamic";

/**
 * Operator (what the product's own services call): JSON `{ tenant, task, steps (1–50),
 * interactive? }` → 201 { jobId, progressToken, progressUrl, queue }. Interactive runs go to
 * `agent-interactive`, the others to `agent-batch`.
 */
export const POST = route(
  "operator",
  async (request) => {
    if (!(request.headers.get("content-type") ?? "").toLowerCase().startsWith("application/json")) {
      throw new ApiError(415, "unsupported_media_type", "Send a JSON body: { tenant, task, steps, interactive }.");
    }
    const body: unknown = await request.json().catch(() => {
      throw new ApiError(400, "bad_json", "The request body is not valid JSON.");
    });
    try {
      const run = await createAgentRun(body);
      const progressUrl = `/progress/${run.progressToken}`;
      return Response.json(
        { jobId: run.jobId, progressToken: run.progressToken, progressUrl, queue: run.queue, steps: run.steps },
        { status: 201, headers: { Location: progressUrl } },
      );
    } catch (err) {
      if (err instanceof EnqueueFailed) throw new ApiError(503, "queue_unavailable", "The agent run cannot be started right now (the job queue is unavailable). Nothing was saved; try again in a minute.");
      throw err;
    }
  },
  "POST /api/agent-runs",
);
