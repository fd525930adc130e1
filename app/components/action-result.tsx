/**
 * Under an action's button: why it is disabled (if it is), and the action's result, announced to
 * screen readers (`aria-live`; a refusal as an alert).
 */
export function ActionResult({
  disabledReason,
  state,
}: {
  disabledReason: string | null;
  state: { ok?: boolean; message?: string };
}) {
  return (
    <>
      {disabledReason ? <p className="muted small">{disabledReason}</p> : null}
      <div aria-live="polite">
        {state.message ? (
          <p className={state.ok ? "message ok" : "form-error"} role={state.ok ? "status" : "alert"}>
            {state.message}
          </p>
        ) : null}
      </div>
    </>
  );
}
