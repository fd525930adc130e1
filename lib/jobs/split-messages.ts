import type { PlanResult, SplitResult } from "./split";

/** One place that turns a split (or its proposal) into an HTTP status and the words a person reads. */
export function describeSplit(r: SplitResult | PlanResult): { status: number; code: string; message: string } {
  switch (r.type) {
    case "plan":
      return { status: 200, code: "plan", message: r.plan.arithmetic };
    case "split":
      return {
        status: 202,
        code: "split",
        message: `Split into ${r.children.length} parts of ~${Math.ceil(r.plan.remaining / r.children.length).toLocaleString("en-US")} ${r.plan.noun}s; they are queued. The customer’s progress page shows their total.`,
      };
    case "not_found":
      return { status: 404, code: "not_found", message: "No job with this id." };
    case "not_splittable":
      return { status: 409, code: "job_not_splittable", message: `This job cannot be split. ${r.message}` };
    case "queue_unavailable":
      return { status: 503, code: "queue_unavailable", message: r.message };
  }
}
