"use server";

import { z } from "zod";
import { operatorAction, type ActionState as OperatorActionState } from "@/lib/http/operator";
import { cancelJob, describeCancel } from "@/lib/actions/cancel";
import { retryJob } from "@/lib/actions/retry";
import { describeRetry } from "@/lib/actions/retry-messages";
import { partsSchema, splitJob } from "@/lib/actions/split";
import { describeSplit } from "@/lib/actions/split-messages";
import { REASK_ROWS, reaskRows } from "@/lib/reasks/reask";
import { describeReask } from "@/lib/reasks/reask-messages";

export type ActionState = OperatorActionState;

/** A number field: empty means "not given". */
const optionalNumber = z
  .string()
  .trim()
  .transform((s) => (s === "" ? undefined : Number(s)));

/** The job a form acts on, as sent: audited and redrawn even when the rest of the form is invalid. */
const jobIdField = (raw: { jobId: FormDataEntryValue | null }) =>
  typeof raw.jobId === "string" ? raw.jobId.slice(0, 64) : null;
const jobPage = (raw: { jobId: FormDataEntryValue | null }) => {
  const jobId = jobIdField(raw);
  return jobId ? `/jobs/${jobId}` : null;
};

const retry = operatorAction({
  action: "job.retry",
  fields: (form) => ({ jobId: form.get("jobId"), budgetSoftS: form.get("budgetSoftS") ?? "" }),
  schema: z.object({
    jobId: z.string().max(64),
    budgetSoftS: optionalNumber.pipe(
      z
        .number({ error: "The budget must be a number of seconds" })
        .positive("The budget must be more than 0 s")
        .max(86_400, "At most 86,400 s (24 h)")
        .optional(),
    ),
  }),
  target: jobIdField,
  params: (input) => ({ budgetSoftS: input.budgetSoftS ?? null }),
  run: (input, principal) => retryJob(input.jobId, principal, { budgetSoftS: input.budgetSoftS }),
  describe: describeRetry,
  revalidate: jobPage,
});

/** The job page's Retry: the same lib function as POST /api/jobs/:id/retry, with the same audit entry. */
export async function retryJobAction(prev: ActionState, form: FormData): Promise<ActionState> {
  return retry(prev, form);
}

const reask = operatorAction({
  action: "job.reask",
  fields: (form) => ({ jobId: form.get("jobId"), route: form.get("route"), rows: form.get("rows") }),
  schema: z.object({
    jobId: z.string().max(64),
    route: z.string({ error: "Choose a provider" }).trim().min(1, "Choose a provider").max(40),
    rows: z.enum(REASK_ROWS, { error: "Choose which rows" }),
  }),
  target: jobIdField,
  params: (input) => ({ route: input.route, rows: input.rows }),
  run: (input, principal) => reaskRows(input.jobId, principal, { route: input.route, rows: input.rows }),
  describe: describeReask,
  revalidate: jobPage,
});

/** The job page's Re-ask: the same lib function as POST /api/jobs/:id/retry with a route, with the same audit entry. */
export async function reaskRowsAction(prev: ActionState, form: FormData): Promise<ActionState> {
  return reask(prev, form);
}

const split = operatorAction({
  action: "job.split",
  fields: (form) => ({ jobId: form.get("jobId"), parts: form.get("parts") ?? "" }),
  schema: z.object({ jobId: z.string().max(64), parts: optionalNumber.pipe(partsSchema.optional()) }),
  target: jobIdField,
  params: (input) => ({ parts: input.parts ?? null }),
  run: (input, principal) => splitJob(input.jobId, principal, { parts: input.parts }),
  describe: describeSplit,
  revalidate: jobPage,
});

/** The job page's Split: the same lib function as POST /api/jobs/:id/split, with the same audit entry. */
export async function splitJobAction(prev: ActionState, form: FormData): Promise<ActionState> {
  return split(prev, form);
}

const cancel = operatorAction({
  action: "job.cancel",
  fields: (form) => ({ jobId: form.get("jobId"), reason: form.get("reason") ?? "" }),
  schema: z.object({
    jobId: z.string().max(64),
    reason: z.string().trim().max(500, "The reason is at most 500 characters"),
  }),
  target: jobIdField,
  params: (input) => ({ reason: input.reason || null }),
  run: (input, principal) => cancelJob(input.jobId, principal, { reason: input.reason || undefined }),
  describe: describeCancel,
  revalidate: jobPage,
});

/** The job page's Cancel: the same lib function as POST /api/jobs/:id/cancel, with the same audit entry. */
export async function cancelJobAction(prev: ActionState, form: FormData): Promise<ActionState> {
  return cancel(prev, form);
}
