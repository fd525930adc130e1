"use server";

import { z } from "zod";
import { operatorAction, type ActionState } from "@/lib/http/operator";
import { bulkRetryFilterSchema, previewBulkRetry, retryJobs } from "@/lib/actions/bulk-retry";
import { describeBulkRetry, type BulkRetryOutcome } from "@/lib/actions/bulk-retry-messages";
import { bulkReask, bulkReaskSchema, describeBulkReask, type BulkReaskResult } from "@/lib/reasks/bulk";
import { REASK_ROWS } from "@/lib/reasks/reask";

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

export interface BulkReaskState extends ActionState {
  /** Set after a preview: how many imports the confirmed re-ask would take, and the choice counted. */
  preview?: { imports: number; overCap: boolean; choice: string };
}

const reaskFormSchema = z.object({
  intent: z.enum(["preview", "reask"]),
  body: z
    .object({
      tenant: z.string().trim(),
      from: utcField,
      to: utcField,
      route: z.string(),
      rows: z.enum(REASK_ROWS, { error: `rows is one of ${REASK_ROWS.join(", ")}` }),
    })
    .transform(({ route, rows, ...fields }, ctx) => {
      const filter = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined && v !== ""));
      const parsed = bulkReaskSchema.safeParse({ route, rows, filter });
      if (parsed.success) return parsed.data;
      for (const issue of parsed.error.issues)
        ctx.addIssue({ code: "custom", message: issue.message, path: issue.path });
      return z.NEVER;
    }),
  /** The canonical choice of the preview the operator confirmed. */
  confirmed: z.string(),
});

type ReaskFields = { intent: string; body: Record<string, string>; confirmed: string };

const bulkReaskForm = operatorAction({
  action: (raw: ReaskFields) => (raw.intent === "reask" ? "jobs.reask" : "jobs.reask.preview"),
  fields: (form): ReaskFields => {
    const field = (name: string) => {
      const v = form.get(name);
      return typeof v === "string" ? v : "";
    };
    return {
      intent: field("intent") || "preview",
      body: {
        tenant: field("tenant"),
        from: field("from"),
        to: field("to"),
        route: field("route"),
        rows: field("rows"),
      },
      confirmed: field("confirmed"),
    };
  },
  schema: reaskFormSchema,
  params: (input) => ({ ...input.body.filter, route: input.body.route, rows: input.body.rows }),
  invalid: (error) => {
    const issue = error.issues[0];
    const problem = issue ? `${issue.path.slice(1).join(".")}: ${issue.message}` : "The form could not be read.";
    return { problem, message: `Check the choice: ${problem}` };
  },
  run: async (input, principal): Promise<BulkReaskResult> => {
    const choice = canonical({ ...input.body.filter, route: input.body.route, rows: input.body.rows });
    if (input.intent === "preview") return bulkReask({ ...input.body, dryRun: true }, principal);
    // The re-ask takes exactly the choice whose count the operator saw, or nothing.
    if (input.confirmed !== choice) return { type: "choice_changed" };
    return bulkReask({ ...input.body, dryRun: false }, principal);
  },
  describe: describeBulkReask,
  state: (r, d, input): BulkReaskState =>
    r.type === "preview"
      ? {
          ok: !r.overCap && r.imports > 0,
          message: d.message,
          preview: {
            imports: r.imports,
            overCap: r.overCap,
            choice: canonical({ ...input.body.filter, route: input.body.route, rows: input.body.rows }),
          },
        }
      : { ok: d.ok, message: d.message },
  revalidate: (raw) => (raw.intent === "reask" ? "/jobs" : null),
});

/**
 * The jobs page's bulk re-ask: a preview first (how many imports have those rows), then the re-ask.
 * The same lib function and audit actions as POST /api/jobs/reask with and without `dryRun`.
 */
export async function bulkReaskAction(prev: BulkReaskState, form: FormData): Promise<BulkReaskState> {
  return bulkReaskForm(prev, form);
}
