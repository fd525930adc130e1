"use client";

import { useRouter } from "next/navigation";
import { useState, type FormEvent } from "react";

export function DocumentsForm(props: { maxFiles: number; maxFileLabel: string; maxTotalLabel: string; typesLabel: string }) {
  const router = useRouter();
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  async function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setError(null);
    const form = new FormData(event.currentTarget);
    const files = form.getAll("files").filter((f): f is File => f instanceof File && !(f.size === 0 && f.name === ""));
    if (files.length === 0) {
      setError("Choose at least one document to upload.");
      return;
    }
    if (files.length > props.maxFiles) {
      setError(`You chose ${files.length} documents; the limit is ${props.maxFiles} per batch. Split them into smaller batches.`);
      return;
    }
    setPending(true);
    try {
      const response = await fetch("/api/documents", { method: "POST", body: form });
      const body = await response.json().catch(() => null);
      if (response.status === 201 && body?.progressUrl) {
        router.push(body.progressUrl);
        return;
      }
      setError(body?.error?.message ?? `The upload failed (HTTP ${response.status}). Try again.`);
    } catch {
      setError("The upload did not reach the server. Check your connection and try again.");
    }
    setPending(false);
  }

  return (
    <form onSubmit={onSubmit} className="form-stack" noValidate>
      <label className="field">
        Your account (tenant)
        <input type="text" name="tenant" required placeholder="e.g. acme" autoComplete="organization" />
      </label>
      <div className="dropzone">
        <label className="field">
          Documents
          <input type="file" name="files" multiple required accept=".pdf,.png,.jpg,.jpeg,.tif,.tiff,.txt,application/pdf,image/png,image/jpeg,image/tiff,text/plain" />
        </label>
        <p className="small muted" style={{ marginBottom: 0 }}>
          {props.typesLabel}. Up to {props.maxFiles} documents, {props.maxFileLabel} each and {props.maxTotalLabel} together.
        </p>
      </div>
      <div aria-live="assertive">{error ? <p className="form-error" role="alert">{error}</p> : null}</div>
      <div>
        <button type="submit" disabled={pending}>
          {pending ? "Uploading…" : "Upload and read"}
        </button>
      </div>
    </form>
  );
}
