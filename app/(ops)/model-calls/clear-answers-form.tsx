"use client";

import { useActionState } from "react";
import type { ActionState } from "@/lib/http/operator";
import { ActionResult } from "../../components/action-result";
import { clearCategoryAnswersAction } from "./actions";

/** Forget one tenant's stored category answers: its next imports ask the model for every row again. */
export function ClearAnswersForm({ canAct }: { canAct: boolean }) {
  const [state, action, pending] = useActionState<ActionState, FormData>(clearCategoryAnswersAction, {});
  return (
    <form action={action}>
      <div className="inline-form">
        <label className="field">
          Tenant
          <input
            name="tenant"
            required
            placeholder="acme"
            autoComplete="off"
            disabled={!canAct}
            style={{ width: "10rem" }}
          />
        </label>
        <button type="submit" className="secondary" disabled={!canAct || pending}>
          {pending ? "Clearing…" : "Clear stored answers"}
        </button>
      </div>
      <ActionResult disabledReason={canAct ? null : "Clearing stored answers needs the operator role."} state={state} />
    </form>
  );
}
