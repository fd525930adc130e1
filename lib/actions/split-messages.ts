import { formatCount } from "@/lib/format/number";
import type { Described } from "@/lib/http/operator";
import type { PlanResult, SplitResult } from "./split";

/** One place that turns a split (or its proposal) into an HTTP status and the words a person reads. */
export function describeSplit(r: SplitResult | PlanResult): Described {
  switch (r.type) {
    case "plan":
      // The proposal is the answer itself: its arithmetic is already in it.
      return { ok: true, status: 200, code: "plan", message: r.plan.arithmetic, body: r.plan };
    case "split":
      return {
        ok: true,
        status: 202,
        code: "split",
        message: `Split into ${r.plan.parts} parts of ~${formatCount(Math.ceil(r.plan.remaining / r.plan.parts))} ${r.plan.noun}s, run one after another: the first is queued. The customer’s progress page shows one job.`,
      };
    case "not_found":
      return { ok: false, status: 404, code: "not_found", message: "No job with this id." };
    case "not_splittable":
      return { ok: false, status: 409, code: "job_not_splittable", message: `This job cannot be split. ${r.message}` };
    case "queue_unavailable":
      return { ok: false, status: 503, code: "queue_unavailable", message: r.message };
  }
}
