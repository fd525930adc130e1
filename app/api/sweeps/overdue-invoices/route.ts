import { operatorRoute } from "@/lib/http/operator";
import { scheduleOverdueSweep } from "@/lib/invoices/schedule";
import { describeJobStarted, describeQueueUnavailable, startOrQueueUnavailable } from "@/lib/jobs/start-outcome";

export const dynamic = "force-dynamic";

/**
 * Operator: starts an overdue-invoice sweep now, over every invoice open and due before today
 * (UTC) → 201 { jobId, progressToken, progressUrl, total, asOf }. 409 while a sweep is unfinished
 * (at most one at a time). Takes no body.
 */
export const POST = operatorRoute({
  name: "POST /api/sweeps/overdue-invoices",
  action: "sweep.start",
  target: "overdue_invoices",
  run: () => startOrQueueUnavailable(scheduleOverdueSweep({ whenNothingDue: "create" })),
  describe: (r) => {
    if (r.type === "queue_unavailable") return describeQueueUnavailable(r, "sweep");
    const s = r.started;
    switch (s.type) {
      case "created":
        return describeJobStarted(s, `sweep ${s.jobId} queued`, { total: s.total, asOf: s.asOf });
      case "already_running":
        return {
          ok: false,
          status: 409,
          code: "sweep_running",
          message: `A sweep is still running (job ${s.jobId}); wait for it to finish, then start another.`,
          audit: "refused: already_running",
        };
      case "nothing_due":
        // An operator's sweep is created even with nothing due (`whenNothingDue: "create"`).
        throw new Error(`unexpected sweep outcome ${s.type}`);
    }
  },
});
