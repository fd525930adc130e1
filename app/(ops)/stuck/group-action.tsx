"use client";

import { startTransition, useActionState, useState } from "react";
import { ActionResult } from "../../components/action-result";
import { stuckGroupAction, type StuckActionState } from "./actions";
import { formatCount } from "@/lib/format/number";

const n = formatCount;

/**
 * A group's bulk action in two steps: the button names how many jobs it takes; the confirm step
 * says again what will happen to how many, and only its button sends the ids shown.
 */
export function GroupAction(props: {
  cause: string;
  title: string;
  intent: "fail" | "retry" | "handle";
  ids: string[];
  cap: number;
  canAct: boolean;
  disabledReason: string | null;
}) {
  const [state, action, pending] = useActionState<StuckActionState, FormData>(stuckGroupAction, {});
  const [confirming, setConfirming] = useState(false);
  const count = props.ids.length;
  const overCap = count > props.cap;
  const verb = props.intent === "fail" ? "Mark failed" : props.intent === "handle" ? "Mark handled" : "Retry";
  const jobs = `${n(count)} job${count === 1 ? "" : "s"}`;
  const label = props.intent === "handle" ? `Mark ${jobs} handled` : `${verb} ${jobs}`;
  const reason = !props.canAct
    ? props.disabledReason
    : overCap
      ? `${n(count)} jobs: a bulk action takes at most ${n(props.cap)}. Act on them from the jobs page in parts.`
      : null;
  const confirm = () => {
    const data = new FormData();
    data.set("cause", props.cause);
    data.set("intent", props.intent);
    data.set("jobIds", JSON.stringify(props.ids));
    setConfirming(false);
    startTransition(() => action(data));
  };
  return (
    <div
      className="stuck-action"
      data-testid={props.intent === "handle" ? `action-${props.cause}-handle` : `action-${props.cause}`}
    >
      {confirming ? (
        <fieldset
          aria-label={`${props.title}: confirm ${verb.toLowerCase()} ${jobs}`}
          className="filters confirm-step"
          style={{ alignItems: "center" }}
        >
          <strong>
            {props.intent === "fail"
              ? `Mark ${jobs} failed? Each gets a message naming you; they can be retried later.`
              : props.intent === "handle"
                ? `Mark ${jobs} handled? They stop counting as waiting on an operator (and stop the alert) until they end again; nothing is run.`
                : `Retry ${jobs}? Each resumes from where it stopped, with its usual budget.`}
          </strong>
          <button type="button" onClick={confirm} disabled={pending}>
            Confirm: {label.toLowerCase()}
          </button>
          <button type="button" className="secondary" onClick={() => setConfirming(false)}>
            Cancel
          </button>
        </fieldset>
      ) : count > 0 ? (
        <button
          type="button"
          className={props.intent === "handle" ? "secondary" : undefined}
          onClick={() => setConfirming(true)}
          disabled={!props.canAct || overCap || pending}
          title={reason ?? undefined}
        >
          {pending ? "Working…" : `${label}…`}
        </button>
      ) : null}
      {/* Kept when the group empties: the result of the action that emptied it stays readable. */}
      <ActionResult disabledReason={count > 0 ? reason : null} state={state} />
    </div>
  );
}
