"use client";

import { startTransition, useActionState, useState } from "react";
import { ActionResult } from "../../components/action-result";
import { stuckGroupAction, type StuckActionState } from "./actions";

const n = (x: number) => x.toLocaleString("en-US");

/**
 * A group's bulk action in two steps: the button names how many jobs it takes; the confirm step
 * says again what will happen to how many, and only its button sends the ids shown.
 */
export function GroupAction(props: {
  cause: string;
  title: string;
  intent: "fail" | "retry";
  ids: string[];
  cap: number;
  canAct: boolean;
  disabledReason: string | null;
}) {
  const [state, action, pending] = useActionState<StuckActionState, FormData>(stuckGroupAction, {});
  const [confirming, setConfirming] = useState(false);
  const count = props.ids.length;
  const overCap = count > props.cap;
  const verb = props.intent === "fail" ? "Mark failed" : "Retry";
  const jobs = `${n(count)} job${count === 1 ? "" : "s"}`;
  const reason = !props.canAct ? props.disabledReason : overCap ? `${n(count)} jobs: a bulk action takes at most ${n(props.cap)}. Act on them from the jobs page in parts.` : null;
  const confirm = () => {
    const data = new FormData();
    data.set("cause", props.cause);
    data.set("intent", props.intent);
    data.set("jobIds", JSON.stringify(props.ids));
    setConfirming(false);
    startTransition(() => action(data));
  };
  return (
    <div className="stuck-action" data-testid={`action-${props.cause}`}>
      {confirming ? (
        <div role="group" aria-label={`${props.title}: confirm ${verb.toLowerCase()} ${jobs}`} className="filters" style={{ alignItems: "center" }}>
          <strong>
            {props.intent === "fail"
              ? `Mark ${jobs} failed? Each gets a message naming you; they can be retried later.`
              : `Retry ${jobs}? Each resumes from where it stopped.`}
          </strong>
          <button type="button" onClick={confirm} disabled={pending}>
            Confirm: {verb.toLowerCase()} {jobs}
          </button>
          <button type="button" className="secondary" onClick={() => setConfirming(false)}>
            Cancel
          </button>
        </div>
      ) : count > 0 ? (
        <button type="button" onClick={() => setConfirming(true)} disabled={!props.canAct || overCap || pending} title={reason ?? undefined}>
          {pending ? "Working…" : `${verb} ${jobs}…`}
        </button>
      ) : null}
      {/* Kept when the group empties: the result of the action that emptied it stays readable. */}
      <ActionResult disabledReason={count > 0 ? reason : null} state={state} />
    </div>
  );
}
