import type { ModelCallOutcome } from "@/generated/prisma/enums";

/**
 * How a timed outside call (a model, OCR or tool call) ended, as its row, the latency charts and
 * the `outcome` label of `bounded_model_call_duration_seconds` say. `aborted` is a call its job
 * cancelled (deadline, cancel, hand-over); `superseded` is a hedged request cancelled because the
 * same request, sent twice, was answered by the other one: no failure.
 */
export const CALL_OUTCOMES = ["ok", "error", "aborted", "superseded"] as const satisfies readonly ModelCallOutcome[];

export type CallOutcome = (typeof CALL_OUTCOMES)[number];

/**
 * The calls that did not answer their caller, as the overview counts them: failed, or cut by their
 * job. A superseded request is left out: its twin answered.
 */
export function failedCallCount(byOutcome: Readonly<Record<CallOutcome, number>>): number {
  return byOutcome.error + byOutcome.aborted;
}
