"use client";

import { startTransition, useActionState, useState, type FormEvent } from "react";
import { bulkReaskAction, type BulkReaskState } from "./actions";
import { SelectField, TextField } from "../../components/field";
import { formatCount } from "@/lib/format/number";
import { PreviewThenConfirm } from "./preview-then-confirm";

const ROWS = [
  { value: "fallback", label: "rows a fallback answered" },
  { value: "failed", label: "failed rows" },
  { value: "all", label: "all rows" },
];

/**
 * Ask the rows of every ended import matching a filter again on one provider: Preview shows how
 * many imports have such rows (and the cap); only then can it be confirmed, and changing the
 * choice asks for a new preview. Each import gets a re-ask job of its own.
 */
export function BulkReaskForm(props: { providers: readonly string[]; canAct: boolean; disabledReason: string | null }) {
  const [state, action, pending] = useActionState<BulkReaskState, FormData>(bulkReaskAction, {});
  const [choice, setChoice] = useState({
    tenant: "",
    from: "",
    to: "",
    route: props.providers[0] ?? "",
    rows: "fallback",
  });
  const [previewedChoice, setPreviewedChoice] = useState<string | null>(null);
  const current = JSON.stringify(choice);
  const previewed = state.preview && previewedChoice === current && !state.preview.overCap && state.preview.imports > 0;
  const bind = (name: keyof typeof choice) => ({
    name,
    value: choice[name],
    disabled: !props.canAct,
    onChange: (e: { target: { value: string } }) => setChoice((c) => ({ ...c, [name]: e.target.value })),
  });
  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget, (e.nativeEvent as SubmitEvent).submitter);
    if (data.get("intent") === "preview") setPreviewedChoice(current);
    else if (state.preview) data.set("confirmed", state.preview.choice);
    startTransition(() => action(data));
  };
  return (
    <form className="filters" aria-label="Bulk re-ask" onSubmit={submit}>
      <SelectField label="Rows" options={ROWS} {...bind("rows")} />
      <SelectField label="Ask on" options={props.providers} {...bind("route")} />
      <TextField label="Tenant" placeholder="any" {...bind("tenant")} />
      <TextField label="Created from (UTC)" type="datetime-local" {...bind("from")} />
      <TextField label="to (UTC)" type="datetime-local" {...bind("to")} />
      <PreviewThenConfirm
        intent="reask"
        pending={pending}
        canAct={props.canAct}
        disabledReason={props.disabledReason}
        previewed={Boolean(previewed)}
        confirm={{
          ready: `Ask again in ${formatCount(state.preview?.imports ?? 0)} import${state.preview?.imports === 1 ? "" : "s"}`,
          idle: "Ask matching imports again",
          why: "Preview first: see how many imports match",
        }}
        state={state}
      />
    </form>
  );
}
