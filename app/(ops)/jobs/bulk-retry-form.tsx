"use client";

import { startTransition, useActionState, useState, type FormEvent } from "react";
import { bulkRetryAction, type BulkRetryState } from "./actions";
import { SelectField, TextField } from "../../components/field";
import { formatCount } from "@/lib/format/number";
import { PreviewThenConfirm } from "./preview-then-confirm";

/**
 * Retry every job matching a filter: Preview shows how many match (and the cap); only then can
 * the retry be confirmed, and changing the filter asks for a new preview.
 */
export function BulkRetryForm(props: {
  kinds: readonly string[];
  statuses: readonly { value: string; label: string }[];
  canAct: boolean;
  disabledReason: string | null;
}) {
  const [state, action, pending] = useActionState<BulkRetryState, FormData>(bulkRetryAction, {});
  // Controlled fields, and the action dispatched by hand: a `<form action>` resets its fields after
  // each submission, and the page must always show the filter that will be sent.
  const [filter, setFilter] = useState({ kind: "", status: "", tenant: "", from: "", to: "" });
  // The preview belongs to the filter it was made for: an edit after it asks for a new one.
  const [previewedFilter, setPreviewedFilter] = useState<string | null>(null);
  const current = JSON.stringify(filter);
  const previewed = state.preview && previewedFilter === current && !state.preview.overCap && state.preview.count > 0;
  const bind = (name: keyof typeof filter) => ({
    name,
    value: filter[name],
    disabled: !props.canAct,
    onChange: (e: { target: { value: string } }) => setFilter((f) => ({ ...f, [name]: e.target.value })),
  });
  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget, (e.nativeEvent as SubmitEvent).submitter);
    if (data.get("intent") === "preview") setPreviewedFilter(current);
    // The server checks the retry against the filter it counted (the same filter, in its words).
    else if (state.preview) data.set("confirmed", state.preview.filter);
    startTransition(() => action(data));
  };
  return (
    <form className="filters" aria-label="Bulk retry" onSubmit={submit}>
      <SelectField label="Kind" any="any" options={props.kinds} {...bind("kind")} />
      <SelectField label="Status" any="any that can be retried" options={props.statuses} {...bind("status")} />
      <TextField label="Tenant" placeholder="any" {...bind("tenant")} />
      <TextField label="Created from (UTC)" type="datetime-local" {...bind("from")} />
      <TextField label="to (UTC)" type="datetime-local" {...bind("to")} />
      <PreviewThenConfirm
        intent="retry"
        pending={pending}
        canAct={props.canAct}
        disabledReason={props.disabledReason}
        previewed={Boolean(previewed)}
        confirm={{
          ready: `Retry ${formatCount(state.preview?.count ?? 0)} job${state.preview?.count === 1 ? "" : "s"}`,
          idle: "Retry matching jobs",
          why: "Preview first: see how many jobs match",
        }}
        state={state}
      />
    </form>
  );
}
