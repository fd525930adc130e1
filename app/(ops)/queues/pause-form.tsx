"use client";

import { useActionState } from "react";
import { ActionResult } from "../../components/action-result";
import { pauseQueueAction, resumeQueueAction, type ActionState } from "./actions";

/** Pause or Resume one queue (operators only: the action checks the role again on the server). */
export function PauseForm({ queue, paused, canAct }: { queue: string; paused: boolean; canAct: boolean }) {
  const [state, action, pending] = useActionState<ActionState, FormData>(
    paused ? resumeQueueAction : pauseQueueAction,
    {},
  );
  const label = paused ? `Resume ${queue}` : `Pause ${queue}`;
  return (
    <form action={action} className="inline-form" style={{ margin: 0 }}>
      <input type="hidden" name="queue" value={queue} />
      <button
        type="submit"
        className={paused ? undefined : "secondary"}
        disabled={!canAct || pending}
        title={paused ? "Waiting jobs start again" : "Running jobs finish; no new job starts until resumed"}
      >
        {pending ? (paused ? "Resuming…" : "Pausing…") : label}
      </button>
      <ActionResult disabledReason={canAct ? null : "Pausing and resuming need the operator role."} state={state} />
    </form>
  );
}
