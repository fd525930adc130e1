import { formatCount } from "@/lib/format/number";
import type { Described } from "@/lib/http/operator";
import type { BulkRetryResult, previewBulkRetry } from "./bulk-retry";

type BulkRetryPreview = Awaited<ReturnType<typeof previewBulkRetry>>;

/**
 * Everything a bulk retry can answer: the preview count, the retry's result, or — from the jobs
 * page, which retries only the filter whose count the operator saw — a filter that changed since.
 */
export type BulkRetryOutcome = ({ type: "preview" } & BulkRetryPreview) | BulkRetryResult | { type: "filter_changed" };

/** One place that turns a bulk retry (or its preview) into an HTTP status and the words a person reads. */
export function describeBulkRetry(r: BulkRetryOutcome): Described {
  switch (r.type) {
    case "preview": {
      const message = r.overCap
        ? `${formatCount(r.count)} jobs match; a bulk retry takes at most ${formatCount(r.cap)}. Narrow the filter (kind, tenant, time range).`
        : r.count === 0
          ? "No job matches: nothing to retry."
          : `${formatCount(r.count)} job${r.count === 1 ? "" : "s"} match${r.count === 1 ? "es" : ""}. Each resumes at its cursor.`;
      return {
        ok: true,
        status: 200,
        code: "preview",
        message,
        audit: `preview: ${r.count} jobs match`,
        body: { count: r.count, cap: r.cap, overCap: r.overCap },
      };
    }
    case "done":
      return { ok: true, status: 202, code: "retried", message: r.message };
    case "over_cap":
      return { ok: false, status: 422, code: "too_many_jobs", message: r.message };
    case "filter_changed":
      return {
        ok: false,
        status: 409,
        code: "filter_changed",
        message: "The filter changed since the preview: preview again before retrying.",
        audit: "refused: the filter differs from the one previewed",
      };
  }
}
