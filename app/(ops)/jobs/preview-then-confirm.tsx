import type { ActionState } from "@/lib/http/operator";

/**
 * The two buttons of a bulk form and its answer: Preview, then the action itself — offered only
 * once a preview of the current choice found something to act on — and what the server said.
 */
export function PreviewThenConfirm(props: {
  /** The confirm button's `intent` value (the preview's is `preview`). */
  intent: string;
  pending: boolean;
  canAct: boolean;
  disabledReason: string | null;
  /** The current choice was previewed and matches something within the cap. */
  previewed: boolean;
  /** The confirm button's label once previewed, and before. */
  confirm: { ready: string; idle: string; why: string };
  state: ActionState & { preview?: { overCap: boolean } };
}) {
  const { state } = props;
  const disabled = !props.canAct || props.pending;
  return (
    <>
      <button
        type="submit"
        name="intent"
        value="preview"
        className="secondary"
        disabled={disabled}
        title={props.disabledReason ?? undefined}
      >
        {props.pending ? "Counting…" : "Preview"}
      </button>
      <button
        type="submit"
        name="intent"
        value={props.intent}
        disabled={disabled || !props.previewed}
        title={props.previewed ? undefined : props.confirm.why}
      >
        {props.previewed ? props.confirm.ready : props.confirm.idle}
      </button>
      <div aria-live="polite" style={{ flexBasis: "100%" }}>
        {props.disabledReason ? <p className="muted small">{props.disabledReason}</p> : null}
        {state.message ? (
          <p
            className={state.ok || (state.preview && !state.preview.overCap) ? "message ok" : "form-error"}
            role={state.ok ? "status" : "alert"}
          >
            {state.message}
          </p>
        ) : null}
      </div>
    </>
  );
}
