"use client";

import { useActionState } from "react";
import { ActionResult } from "../../../components/action-result";
import { splitJobAction, type ActionState } from "./actions";

/** Confirms the split shown above it: the number of parts is the plan's, fixed when the plan was shown. */
export function SplitForm(props: { jobId: string; parts: number; canAct: boolean; disabledReason: string | null }) {
  const [state, action, pending] = useActionState<ActionState, FormData>(splitJobAction, {});
  return (
    <form action={action} className="form-stack" style={{ gap: "0.6rem" }}>
      <input type="hidden" name="jobId" value={props.jobId} />
      <input type="hidden" name="parts" value={props.parts} />
      <div>
        <button
          type="submit"
          disabled={!props.canAct || pending || state.ok === true}
          title={props.disabledReason ?? undefined}
        >
          {pending ? "Splitting…" : `Split into ${props.parts} parts`}
        </button>
      </div>
      <ActionResult disabledReason={props.disabledReason} state={state} />
    </form>
  );
}
