import { operatorRoute } from "@/lib/http/operator";
import { describeJobStarted, describeQueueUnavailable, startOrQueueUnavailable } from "@/lib/jobs/start-outcome";
import { startSync } from "@/lib/syncs/create-sync";
import { syncRequestSchema } from "@/lib/syncs/schemas";

export const dynamic = "force-dynamic";

/**
 * Operator (what the product's own services call): JSON `{ tenant, family }` → 201 with the new
 * sync `{ jobId, progressToken, progressUrl, status }`, or 200 with the one still unfinished for
 * that tenant and family (one at a time: a fan-out never schedules a second run while one waits
 * for a rate-limit window). Every call is audited, refusals included.
 */
export const POST = operatorRoute({
  name: "POST /api/syncs",
  action: "sync.start",
  input: { body: syncRequestSchema, example: '{ "tenant": "acme", "family": "statistics" }' },
  target: (input) => (input ? `${input.tenant}:${input.family}` : null),
  run: (input) => startOrQueueUnavailable(startSync(input)),
  describe: (r) => {
    if (r.type === "queue_unavailable")
      return describeQueueUnavailable(
        r,
        "sync",
        "the job queue is unavailable, or the previous run is still winding down",
      );
    const s = r.started;
    return describeJobStarted(
      s,
      s.existing ? `already ${s.status}: job ${s.jobId}` : `started job ${s.jobId}`,
      { status: s.status, existing: s.existing },
      s.existing ? 200 : 201,
    );
  },
});
