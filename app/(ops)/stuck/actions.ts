"use server";

import { z } from "zod";
import { operatorAction, type ActionState } from "@/lib/http/operator";
import { runStuckAction, stuckSelectionSchema } from "@/lib/actions/mark-failed";
import { describeStuckAction } from "@/lib/actions/stuck-messages";

export type StuckActionState = ActionState;

/** The job ids as the form sends them: one JSON array (hundreds of ids do not fit a field each). */
const idsField = z.string().transform((s, ctx) => {
  try {
    return JSON.parse(s === "" ? "[]" : s) as unknown;
  } catch {
    ctx.addIssue({ code: "custom", message: "The selection could not be read." });
    return z.NEVER;
  }
});

const formSchema = z.object({
  cause: z.string().max(40),
  intent: z.enum(["fail", "retry", "handle"]),
  selection: z.object({
    jobIds: idsField.pipe(stuckSelectionSchema.shape.jobIds),
    reason: stuckSelectionSchema.shape.reason,
  }),
});

type Fields = { cause: string; intent: string; selection: { jobIds: string; reason?: string } };

const stuckAction = operatorAction({
  // An unreadable intent is audited as the harmless-sounding name of what it tried; it is refused below.
  action: (raw: Fields) => `stuck.${raw.intent === "retry" || raw.intent === "handle" ? raw.intent : "fail"}`,
  fields: (form): Fields => {
    const field = (name: string) => {
      const v = form.get(name);
      return typeof v === "string" ? v : "";
    };
    const reason = field("reason");
    return {
      cause: field("cause"),
      intent: field("intent"),
      selection: { jobIds: field("jobIds"), ...(reason ? { reason } : {}) },
    };
  },
  schema: formSchema,
  target: (raw) => raw.cause.slice(0, 40) || null,
  params: (input) => ({
    jobIds: input.selection.jobIds,
    count: input.selection.jobIds.length,
    reason: input.selection.reason ?? null,
  }),
  invalid: (error) => {
    const problem = error.issues[0]?.message ?? "The form could not be read.";
    return { problem, message: `Nothing was done: ${problem}` };
  },
  run: (input, principal) => runStuckAction(input.intent, input.cause, input.selection, principal),
  describe: describeStuckAction,
  revalidate: () => "/stuck",
});

/**
 * A stuck group's bulk action (mark failed; retry or mark handled for jobs awaiting an operator):
 * the same lib function and audit action as POST /api/stuck/:cause/fail, /retry and /handled.
 */
export async function stuckGroupAction(prev: StuckActionState, form: FormData): Promise<StuckActionState> {
  return stuckAction(prev, form);
}
