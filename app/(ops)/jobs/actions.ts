"use server";

import { z } from "zod";
import { operatorAction, type ActionState } from "@/lib/http/operator";
import { bulkRetryFilterSchema, previewBulkRetry, retryJobs } from "@/lib/actions/bulk-retry";
import { describeBulkRetry, type BulkRetryOutcome } from "@/lib/actions/bulk-retry-messages";

export interface BulkRetryState extends ActionState {
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
  filter: z
    .object({
      kind: z.string().trim(),
      status: z.string().trim(),
      tenant: z.string().trim(),
      from: utcField,
      to: utcField,
    })
    .transform((f) => Object.fromEntries(Object.entries(f).filter(([, v]) => v !== undefined && v !== "")))
    .pipe(bulkRetryFilterSchema),
  /** The canonical filter of the preview the operator confirmed. */
  confirmed: z.string(),
});

type Fields = { intent: string; filter: Record<string, string>; confirmed: string };

const bulkRetry = operatorAction({
  // An unreadable intent is taken for a preview, which changes nothing.
  action: (raw: Fields) => (raw.intent === "retry" ? "jobs.retry" : "jobs.retry.preview"),
  fields: (form): Fields => {
    const field = (name: string) => {
      const v = form.get(name);
      return typeof v === "string" ? v : "";
    };
    return {
      intent: field("intent") || "preview",
      filter: {
        kind: field("kind"),
        status: field("status"),
        tenant: field("tenant"),
        from: field("from"),
        to: field("to"),
      },
      confirmed: field("confirmed"),
    };
  },
  schema: formSchema,
  params: (input) => input.filter,
  invalid: (error) => {
    const issue = error.issues[0];
    // Only the intent can make the form itself unreadable; every other issue is the filter's.
    const problem =
      issue?.path[0] === "filter"
        ? `${issue.path.slice(1).join(".")}: ${issue.message}`
        : "The form could not be read.";
    return { problem, message: `Check the filter: ${problem}` };
  },
  run: async (input, principal): Promise<BulkRetryOutcome> => {
    if (input.intent === "preview") return { type: "preview", ...(await previewBulkRetry(input.filter)) };
    // The retry takes exactly the filter whose count the operator saw, or nothing.
    if (input.confirmed !== canonical(input.filter)) return { type: "filter_changed" };
    return retryJobs(input.filter, principal);
  },
  describe: describeBulkRetry,
  state: (r, d, input): BulkRetryState =>
    r.type === "preview"
      ? {
          ok: !r.overCap && r.count > 0,
          message: d.message,
          preview: { count: r.count, cap: r.cap, overCap: r.overCap, filter: canonical(input.filter) },
        }
      : { ok: d.ok, message: d.message },
  revalidate: (raw) => (raw.intent === "retry" ? "/jobs" : null),
});

/**
 * The jobs page's bulk retry: a preview first (how many match, the cap), then the retry. The
 * same lib functions and audit actions as POST /api/jobs/retry with and without `dryRun`.
 */
export async function bulkRetryAction(prev: BulkRetryState, form: FormData): Promise<BulkRetryState> {
  return bulkRetry(prev, form);
}
