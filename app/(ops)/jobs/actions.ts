"use server";

import { revalidatePath } from "next/cache";
import { z } from "zod";
import { audited } from "@/lib/audit/audited";
import { Forbidden, Unauthenticated } from "@/lib/auth/errors";
import { bulkRetryFilterSchema, previewBulkRetry, retryJobs } from "@/lib/jobs/bulk-retry";

export interface BulkRetryState {
  ok?: boolean;
  message?: string;
  /** Set after a preview: how many jobs the confirmed retry would take, whether that is over the cap, and the filter counted. */
  preview?: { count: number; cap: number; overCap: boolean; filter: string };
}

/** A filter in one canonical text, so a confirmation can be checked against what was previewed. */
function canonical(filter: Record<string, unknown>): string {
  return JSON.stringify(Object.fromEntries(Object.entries(filter).sort(([a], [b]) => a.localeCompare(b))));
}

/** A `datetime-local` field, read as UTC (the form says so); empty means no bound. */
const utcField = z
  .string()
  .trim()
  .transform((s) => (s === "" ? undefined : /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$/.test(s) ? `${s}:00Z` : s));

const formSchema = z.object({
  intent: z.enum(["preview", "retry"]),
  filter: z.object({ kind: z.string().trim(), status: z.string().trim(), tenant: z.string().trim(), from: utcField, to: utcField }).transform((f) =>
    Object.fromEntries(Object.entries(f).filter(([, v]) => v !== undefined && v !== "")),
  ),
});

/**
 * The jobs page's bulk retry: a preview first (how many match, the cap), then the retry. The
 * same lib functions and audit actions as POST /api/jobs/retry with and without `dryRun`.
 */
export async function bulkRetryAction(_prev: BulkRetryState, form: FormData): Promise<BulkRetryState> {
  const field = (name: string) => {
    const v = form instanceof FormData ? form.get(name) : null;
    return typeof v === "string" ? v : "";
  };
  const raw = formSchema.safeParse({ intent: field("intent") || "preview", filter: { kind: field("kind"), status: field("status"), tenant: field("tenant"), from: field("from"), to: field("to") } });
  const filter = raw.success ? bulkRetryFilterSchema.safeParse(raw.data.filter) : null;
  const intent = raw.success ? raw.data.intent : "preview";
  const problem = !raw.success ? "The form could not be read." : !filter?.success ? `${filter?.error.issues[0]?.path.join(".")}: ${filter?.error.issues[0]?.message}` : null;
  try {
    const state = await audited<BulkRetryState>(
      "operator",
      { action: intent === "preview" ? "jobs.retry.preview" : "jobs.retry", params: filter?.success ? filter.data : { invalid: true } },
      async (principal) => {
        if (problem || !filter?.success) return { result: "refused", message: `refused: ${problem}`, value: { ok: false, message: `Check the filter: ${problem}` } };
        if (intent === "preview") {
          const preview = { ...(await previewBulkRetry(filter.data)), filter: canonical(filter.data) };
          const message = preview.overCap
            ? `${preview.count.toLocaleString("en-US")} jobs match; a bulk retry takes at most ${preview.cap.toLocaleString("en-US")}. Narrow the filter (kind, tenant, time range).`
            : preview.count === 0
              ? "No job matches: nothing to retry."
              : `${preview.count.toLocaleString("en-US")} job${preview.count === 1 ? "" : "s"} match${preview.count === 1 ? "es" : ""}. Each resumes at its cursor.`;
          return { result: "ok", message: `preview: ${preview.count} jobs match`, value: { ok: !preview.overCap && preview.count > 0, message, preview } };
        }
        // The retry takes exactly the filter whose count the operator saw, or nothing.
        if (field("confirmed") !== canonical(filter.data)) {
          return { result: "refused", message: "refused: the filter differs from the one previewed", value: { ok: false, message: "The filter changed since the preview: preview again before retrying." } };
        }
        const r = await retryJobs(filter.data, principal);
        return { result: r.type === "done" ? "ok" : "refused", message: r.message, value: { ok: r.type === "done", message: r.message } };
      },
    );
    if (intent === "retry") revalidatePath("/jobs");
    return state;
  } catch (err) {
    if (err instanceof Unauthenticated || err instanceof Forbidden) return { ok: false, message: err.message };
    throw err;
  }
}
