import { audited } from "@/lib/audit/audited";
import { route } from "@/lib/http/api";
import { readJsonBody } from "@/lib/http/body";
import { ApiError } from "@/lib/http/errors";
import { EnqueueFailed } from "@/lib/jobs/create";
import { startSync } from "@/lib/syncs/create-sync";
import { syncRequestSchema } from "@/lib/syncs/schemas";

export const dynamic = "force-dynamic";

/**
 * Operator (what the product's own services call): JSON `{ tenant, family }` → 201 with the new
 * sync `{ jobId, progressToken, progressUrl, status }`, or 200 with the one still unfinished for
 * that tenant and family (one at a time: a fan-out never schedules a second run while one waits
 * for a rate-limit window). Every call is audited, refusals included.
 */
export const POST = route(
  "public", // the role is checked by `audited`, so that a refusal is recorded too
  async (request) => {
    const body = await readJsonBody(request, '{ "tenant": "acme", "family": "statistics" }');
    const parsed = syncRequestSchema.safeParse(body.ok ? body.value : undefined);
    const started = await audited(
      "operator",
      { action: "sync.start", target: parsed.success ? `${parsed.data.tenant}:${parsed.data.family}` : null, params: parsed.success ? parsed.data : { invalid: true } },
      async () => {
        if (!parsed.success) return { result: "refused", message: "refused: invalid request", value: null };
        try {
          const s = await startSync(parsed.data);
          return { result: "ok", message: s.existing ? `already ${s.status}: job ${s.jobId}` : `started job ${s.jobId}`, value: s };
        } catch (err) {
          if (!(err instanceof EnqueueFailed)) throw err;
          return { result: "error", message: `failed: ${err.message}`, value: null };
        }
      },
    );
    if (!body.ok) throw body.error;
    if (!parsed.success) throw parsed.error;
    if (!started) throw new ApiError(503, "queue_unavailable", "The sync cannot be started right now (the job queue is unavailable, or the previous run is still winding down). Nothing was saved; try again in a minute.");
    const progressUrl = `/progress/${started.progressToken}`;
    return Response.json(
      { jobId: started.jobId, progressToken: started.progressToken, progressUrl, status: started.status, existing: started.existing },
      { status: started.existing ? 200 : 201, headers: { Location: progressUrl } },
    );
  },
  "POST /api/syncs",
);
