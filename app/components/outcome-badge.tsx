import type { CallOutcome } from "@/lib/core/call-outcomes";

/** A call's outcome as the pages draw it: a failure red, a call its job cut amber, a hedge's twin grey. */
const TONE: Record<CallOutcome, "ok" | "bad" | "warn" | "idle"> = {
  ok: "ok",
  error: "bad",
  aborted: "warn",
  superseded: "idle",
};

/** The same tones as chart colours (the latency histogram's stacked bars). */
export const OUTCOME_COLOR: Record<CallOutcome, string> = {
  ok: "#2f8f5b",
  error: "#c0392b",
  aborted: "#d08a00",
  superseded: "#8a94a6",
};

export function OutcomeBadge({ outcome }: { outcome: CallOutcome }) {
  return <span className={`badge ${TONE[outcome]}`}>{outcome}</span>;
}
