"use client";

import { useActionState } from "react";
import { ActionResult } from "../../components/action-result";
import { removeWebhookAction, setWebhookAction, type ActionState } from "./actions";

/** Register or change a tenant's endpoint; a new secret is shown here once, to copy into the receiver. */
export function SetWebhookForm({ canAct }: { canAct: boolean }) {
  const [state, action, pending] = useActionState<ActionState, FormData>(setWebhookAction, {});
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
        <label className="field" style={{ flex: "1 1 18rem" }}>
          URL (http or https)
          <input
            name="url"
            type="url"
            required
            placeholder="https://example.com/hooks/bounded"
            disabled={!canAct}
            style={{ width: "100%" }}
          />
        </label>
        <label className="small">
          <input type="checkbox" name="rotateSecret" disabled={!canAct} /> new secret
        </label>
        <button type="submit" disabled={!canAct || pending}>
          {pending ? "Saving…" : "Save webhook"}
        </button>
      </div>
      <ActionResult disabledReason={canAct ? null : "Registering webhooks needs the operator role."} state={state} />
      {state.ok && state.secret ? (
        <div className="message warn" role="status">
          <p className="small">
            Signing secret — shown once. The receiver checks each delivery with it (lib/webhooks/verify.ts):
          </p>
          <p>
            <code className="mono" data-testid="webhook-secret" style={{ wordBreak: "break-all" }}>
              {state.secret}
            </code>
          </p>
        </div>
      ) : null}
    </form>
  );
}

export function RemoveWebhookForm({ tenant, canAct }: { tenant: string; canAct: boolean }) {
  const [state, action, pending] = useActionState<ActionState, FormData>(removeWebhookAction, {});
  return (
    <form action={action} style={{ margin: 0 }}>
      <input type="hidden" name="tenant" value={tenant} />
      <button
        type="submit"
        className="secondary"
        disabled={!canAct || pending}
        aria-label={`Remove the webhook of ${tenant}`}
      >
        {pending ? "Removing…" : "Remove"}
      </button>
      <ActionResult disabledReason={null} state={state} />
    </form>
  );
}
