import { formatCount } from "@/lib/format/number";
import type { Described } from "@/lib/http/operator";
import type { StuckActionOutcome } from "./mark-failed";
import { CAUSE_TITLE } from "@/lib/diagnosis/stuck-causes";

const jobs = (x: number) => `${formatCount(x)} job${x === 1 ? "" : "s"}`;

/** One place that turns a stuck group's bulk action into an HTTP status and the words a person reads. */
export function describeStuckAction(r: StuckActionOutcome): Described {
  switch (r.type) {
    case "unknown_cause":
      return { ok: false, status: 404, code: "not_found", message: r.message };
    case "empty_selection":
      return {
        ok: false,
        status: 400,
        code: "empty_selection",
        message:
          'No job selected: nothing was done. Send "jobIds" with the ids of the jobs to act on (an empty selection never means every job).',
      };
    case "over_cap":
      return {
        ok: false,
        status: 422,
        code: "too_many_jobs",
        message: `${formatCount(r.count)} jobs selected; a bulk action takes at most ${formatCount(r.cap)}. Act on them in parts.`,
      };
    case "wrong_action":
      return {
        ok: false,
        status: 409,
        code: "wrong_action",
        message:
          r.action === "retry"
            ? `"${CAUSE_TITLE[r.cause]}" jobs have already ended: retry them or mark them handled instead.`
            : `"${CAUSE_TITLE[r.cause]}" jobs are still open, so there is nothing to retry or mark handled yet: mark them failed first.`,
      };
    case "done": {
      const verb = r.action === "fail" ? "Marked failed" : r.action === "handle" ? "Marked handled" : "Retried";
      const message = `${verb} ${formatCount(r.done)} of ${jobs(r.selected)}${r.refused.length ? `; ${formatCount(r.refused.length)} refused (${r.refused[0]!.reason}${r.refused.length > 1 ? " …" : ""})` : ""}.`;
      return {
        ok: true,
        status: r.action === "retry" ? 202 : 200,
        code: r.action === "fail" ? "marked_failed" : r.action === "handle" ? "marked_handled" : "retried",
        message,
      };
    }
  }
}
