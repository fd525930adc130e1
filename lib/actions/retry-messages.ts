import type { Described } from "@/lib/http/operator";
import type { RetryResult } from "./retry";

/** One place that turns a retry's result into an HTTP status and the words a person reads. */
export function describeRetry(r: RetryResult): Described {
  switch (r.type) {
    case "retried":
      return {
        ok: true,
        status: 202,
        code: "retried",
        message: `Queued again: ${r.message.replace(/^Retry requested by [^:]+: /, "")}`,
      };
    case "not_found":
      return { ok: false, status: 404, code: "not_found", message: "No job with this id." };
    case "not_retryable":
      return {
        ok: false,
        status: 409,
        code: "job_not_retryable",
        message: `This job cannot be retried now. ${r.message}`,
      };
    case "detail_removed":
      return { ok: false, status: 410, code: "job_detail_removed", message: r.message };
    case "tenant_being_deleted":
      return { ok: false, status: 409, code: "tenant_being_deleted", message: r.message };
    case "budget_out_of_bounds":
      return { ok: false, status: 422, code: "budget_out_of_bounds", message: r.message };
    case "queue_unavailable":
      return { ok: false, status: 503, code: "queue_unavailable", message: r.message };
  }
}
