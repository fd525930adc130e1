import type { ModelCallOutcome } from "@/generated/prisma/enums";

/**
 * How a timed outside call (a model, OCR or tool call) ended, as its row, the latency charts and
 * the `outcome` label of `bounded_model_call_duration_seconds` say. `aborted` is a call its job
 * cancelled (deadline, cancel, hand-over); `superseded` is a hedged request cancelled because the
 * same request, sent twice, was answered by the other one: no failure.
 */
export const CALL_OUTCOMES = ["ok", "error", "aborted", "superseded"] as const satisfies readonly ModelCallOutcome[];

export type CallOutcome = (typeof CALL_OUTCOMES)[number];
