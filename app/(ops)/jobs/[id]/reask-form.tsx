"use client";

import { useActionState, useState } from "react";
import { ActionResult } from "../../../components/action-result";
import { reaskRowsAction, type ActionState } from "./actions";

/** One choice the form offers, with its plan in words (lib/reasks/reask-messages.ts `planSentence`). */
export interface ReaskChoice {
  provider: string;
  model: string;
  rows: "fallback" | "failed" | "all";
  count: number;
  sentence: string;
}

const ROWS_OPTION = { fallback: "Rows a fallback answered", failed: "Failed rows", all: "All rows" } as const;

/**
 * The job page's re-ask: a provider and which rows, the plan for that choice shown before it is
 * sent (rows, calls, estimated cost and time), and the same lib function as
 * `POST /api/jobs/<id>/retry` with `route` behind it.
 */
export function ReaskForm(props: {
  jobId: string;
  choices: ReaskChoice[];
  canAct: boolean;
  disabledReason: string | null;
  defaultProvider: string;
}) {
  const [state, action, pending] = useActionState<ActionState, FormData>(reaskRowsAction, {});
  const providers = [...new Map(props.choices.map((c) => [c.provider, c.model])).entries()];
  const [provider, setProvider] = useState(props.defaultProvider);
  const [rows, setRows] = useState<ReaskChoice["rows"]>("fallback");
  const chosen = props.choices.find((c) => c.provider === provider && c.rows === rows);
  const countOf = (r: ReaskChoice["rows"]) =>
    props.choices.find((c) => c.provider === provider && c.rows === r)?.count ?? 0;
  return (
    <form action={action} className="form-stack" style={{ gap: "0.6rem" }} data-testid="reask-form">
      <input type="hidden" name="jobId" value={props.jobId} />
      <label className="field">
        Ask on
        <select name="route" value={provider} onChange={(e) => setProvider(e.target.value)} disabled={!props.canAct}>
          {providers.map(([name, model]) => (
            <option key={name} value={name}>
              {name} ({model})
            </option>
          ))}
        </select>
      </label>
      <label className="field">
        Rows
        <select
          name="rows"
          value={rows}
          onChange={(e) => setRows(e.target.value as ReaskChoice["rows"])}
          disabled={!props.canAct}
        >
          {(Object.keys(ROWS_OPTION) as ReaskChoice["rows"][]).map((r) => (
            <option key={r} value={r}>
              {ROWS_OPTION[r]} ({countOf(r).toLocaleString("en-US")})
            </option>
          ))}
        </select>
      </label>
      <p className="small" data-testid="reask-preview" aria-live="polite">
        <strong>Before sending:</strong> {chosen?.sentence ?? "—"}
      </p>
      <div>
        <button
          type="submit"
          disabled={!props.canAct || pending || !chosen || chosen.count === 0}
          title={props.disabledReason ?? undefined}
        >
          {pending ? "Sending…" : "Ask these rows again"}
        </button>
      </div>
      <ActionResult disabledReason={props.disabledReason} state={state} />
    </form>
  );
}
