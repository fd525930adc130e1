"use server";

import { revalidatePath } from "next/cache";
import { z } from "zod";
import { audited } from "@/lib/audit/audited";
import { Forbidden, Unauthenticated } from "@/lib/auth/errors";
import { retryJob } from "@/lib/jobs/retry";
import { describeRetry } from "@/lib/jobs/retry-messages";
import { partsSchema, splitJob } from "@/lib/jobs/split";
import { describeSplit } from "@/lib/jobs/split-messages";

export interface ActionState {
  ok?: boolean;
  message?: string;
}

const retryFormSchema = z.object({
  jobId: z.string().max(64),
  budgetSoftS: z
    .string()
    .trim()
    .transform((s) => (s === "" ? undefined : Number(s)))
    .pipe(z.number({ error: "The budget must be a number of seconds" }).positive("The budget must be more than 0 s").max(86_400, "At most 86,400 s (24 h)").optional()),
});

/** The job page's Retry: the same lib function as POST /api/jobs/:id/retry, with the same audit entry. */
export async function retryJobAction(_prev: ActionState, form: FormData): Promise<ActionState> {
  // Anyone can post anything to an action: the arguments are checked, never trusted.
  const field = (name: string) => (form instanceof FormData ? form.get(name) : null);
  const parsed = retryFormSchema.safeParse({ jobId: field("jobId"), budgetSoftS: field("budgetSoftS") ?? "" });
  const jobId = typeof field("jobId") === "string" ? String(field("jobId")).slice(0, 64) : null;
  try {
    const state = await audited("operator", { action: "job.retry", target: jobId, params: parsed.success ? { budgetSoftS: parsed.data.budgetSoftS ?? null } : { invalid: true } }, async (principal) => {
      if (!parsed.success) return { result: "refused", message: `refused: ${parsed.error.issues[0]?.message}`, value: { ok: false, message: parsed.error.issues[0]?.message } };
      const r = await retryJob(parsed.data.jobId, principal, { budgetSoftS: parsed.data.budgetSoftS });
      const d = describeRetry(r);
      return { result: r.type === "retried" ? "ok" : "refused", message: d.message, value: { ok: r.type === "retried", message: d.message } };
    });
    if (jobId) revalidatePath(`/jobs/${jobId}`);
    return state;
  } catch (err) {
    if (err instanceof Unauthenticated || err instanceof Forbidden) return { ok: false, message: err.message };
    throw err;
  }
}

const splitFormSchema = z.object({
  jobId: z.string().max(64),
  parts: z
    .string()
    .trim()
    .transform((s) => (s === "" ? undefined : Number(s)))
    .pipe(partsSchema.optional()),
});

/** The job page's Split: the same lib function as POST /api/jobs/:id/split, with the same audit entry. */
export async function splitJobAction(_prev: ActionState, form: FormData): Promise<ActionState> {
  const field = (name: string) => (form instanceof FormData ? form.get(name) : null);
  const parsed = splitFormSchema.safeParse({ jobId: field("jobId"), parts: field("parts") ?? "" });
  const jobId = typeof field("jobId") === "string" ? String(field("jobId")).slice(0, 64) : null;
  try {
    const state = await audited("operator", { action: "job.split", target: jobId, params: parsed.success ? { parts: parsed.data.parts ?? null } : { invalid: true } }, async (principal) => {
      if (!parsed.success) return { result: "refused", message: `refused: ${parsed.error.issues[0]?.message}`, value: { ok: false, message: parsed.error.issues[0]?.message } };
      const r = await splitJob(parsed.data.jobId, principal, { parts: parsed.data.parts });
      const d = describeSplit(r);
      return { result: r.type === "split" ? "ok" : "refused", message: d.message, value: { ok: r.type === "split", message: d.message } };
    });
    if (jobId) revalidatePath(`/jobs/${jobId}`);
    return state;
  } catch (err) {
    if (err instanceof Unauthenticated || err instanceof Forbidden) return { ok: false, message: err.message };
    throw err;
  }
}
