"use client";

import { isChosenFile, useUpload } from "../components/use-upload";

export function DocumentsForm(props: { maxFiles: number; maxFileLabel: string; maxTotalLabel: string; typesLabel: string }) {
  const { error, pending, onSubmit } = useUpload("/api/documents", (form) => {
    const files = form.getAll("files").filter(isChosenFile);
    if (files.length === 0) return "Choose at least one document to upload.";
    if (files.length > props.maxFiles) return `You chose ${files.length} documents; the limit is ${props.maxFiles} per batch. Split them into smaller batches.`;
    return null;
  });

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
