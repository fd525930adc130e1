import { audited } from "@/lib/audit/audited";
import { errorResponse, route } from "@/lib/http/api";
import { ApiError } from "@/lib/http/errors";
import { scheduleOverdueSweep } from "@/lib/invoices/schedule";
import { EnqueueFailed } from "@/lib/jobs/create";

export const dynamic = "force-dynamic";

/**
 * Operator: starts an overdue-invoice sweep now, over every invoice open and due before today
 * (UTC) → 201 { jobId, progressToken, progressUrl, total, asOf }. 409 while a sweep is unfinished
 * (at most one at a time). Takes no body.
 */
export const POST = route(
  "public", // the role is checked by `audited`, so that a refusal is recorded too
  async () => {
    const started = await audited("operator", { action: "sweep.start", target: "overdue_invoices" }, async () => {
      try {
        const r = await scheduleOverdueSweep({ whenNothingDue: "create" });
        return { result: r.type === "created" ? "ok" : "refused", message: r.type === "created" ? `sweep ${r.jobId} queued` : `refused: ${r.type}`, value: r };
      } catch (err) {
        if (!(err instanceof EnqueueFailed)) throw err;
        return { result: "error", message: `failed: ${err.message}`, value: null };
      }
    });
    if (!started) throw new ApiError(503, "queue_unavailable", "The sweep cannot be started right now (the job queue is unavailable). Nothing was saved; try again in a minute.");
    if (started.type === "already_running") {
      return errorResponse(409, "sweep_running", `A sweep is still running (job ${started.jobId}); wait for it to finish, then start another.`);
    }
    if (started.type !== "created") throw new Error(`unexpected sweep outcome ${started.type}`);
    const progressUrl = `/progress/${started.progressToken}`;
    return Response.json(
      { jobId: started.jobId, progressToken: started.progressToken, progressUrl, total: started.total, asOf: started.asOf },
      { status: 201, headers: { Location: progressUrl } },
    );
  },
  "POST /api/sweeps/overdue-invoices",
);
