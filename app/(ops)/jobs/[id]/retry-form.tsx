"use client";

import { useActionState } from "react";
import { ActionResult } from "../../../components/action-result";
import { retryJobAction, type ActionState } from "./actions";

export function RetryForm(props: {
  jobId: string;
  canAct: boolean;
  disabledReason: string | null;
  softS: number;
  maxSoftS: number;
}) {
  const [state, action, pending] = useActionState<ActionState, FormData>(retryJobAction, {});
  const disabled = !props.canAct || pending;
  return (
    <form action={action} className="form-stack" style={{ gap: "0.6rem" }}>
      <input type="hidden" name="jobId" value={props.jobId} />
      <label className="field">
        Soft budget for the retry, seconds (optional)
        <input
          type="text"
          inputMode="numeric"
          name="budgetSoftS"
          placeholder={`${props.softS} (now) – ${props.maxSoftS}`}
          disabled={!props.canAct}
        />
      </label>
      <div>
        <button type="submit" disabled={disabled} title={props.disabledReason ?? undefined}>
          {pending ? "Retrying…" : "Retry from where it stopped"}
        </button>
      </div>
      <ActionResult disabledReason={props.disabledReason} state={state} />
    </form>
  );
}
