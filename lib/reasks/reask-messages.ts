import type { Described } from "@/lib/http/operator";
import { formatUsd } from "@/lib/format/number";
import { formatSeconds } from "@/lib/format/duration";
import { countLabel } from "@/lib/jobs/messages";
import { ROWS_LABEL, type ReaskPlan, type ReaskResult } from "./reask";

/** A plan in one sentence: "12 rows a fallback answered on primary (bounded-sim-1): 2 calls, about $0.004 and 9 s." */
export function planSentence(plan: ReaskPlan): string {
  const what = `${countLabel(plan.count, "row")} (${ROWS_LABEL[plan.rows]}) on ${plan.provider} (${plan.model})`;
  if (plan.count === 0) return `No ${ROWS_LABEL[plan.rows]} to ask again.`;
  const cost = plan.costUsd === null ? "cost unknown (no price or no answers yet)" : `about ${formatUsd(plan.costUsd)}`;
  const time =
    plan.seconds === null
      ? "time unknown until the provider has answered enough calls"
      : `about ${formatSeconds(plan.seconds * 1000)}`;
  return `${what}: ${countLabel(plan.calls, "model call")}, ${cost}, ${time}.`;
}

/** One place that turns a re-ask's result into an HTTP status and the words a person reads. */
export function describeReask(r: ReaskResult): Described {
  switch (r.type) {
    case "reasked":
      return {
        ok: true,
        status: 202,
        code: "reasked",
        message: `Asking again: ${planSentence(r.plan)} Follow it on job ${r.jobId}.`,
        body: { jobId: r.jobId, sourceJobId: r.sourceJobId, status: "queued", plan: r.plan, message: r.message },
      };
    case "not_found":
      return { ok: false, status: 404, code: "not_found", message: "No job with this id." };
    case "refused":
      return { ok: false, status: r.status, code: r.code, message: r.message };
    case "queue_unavailable":
      return { ok: false, status: 503, code: "queue_unavailable", message: r.message, error: true };
  }
}
