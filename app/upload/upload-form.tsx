"use client";

import { isChosenFile, useUpload } from "../components/use-upload";

export function UploadForm({ maxBytesLabel, maxRows }: { maxBytesLabel: string; maxRows: string }) {
  const { error, pending, onSubmit } = useUpload("/api/imports", (form) => (isChosenFile(form.get("file")) ? null : "Choose a CSV file to upload."));

  return (
    <form onSubmit={onSubmit} className="form-stack" noValidate>
      <label className="field">
        Your account (tenant)
        <input type="text" name="tenant" required placeholder="e.g. acme" autoComplete="organization" />
      </label>
      <div className="dropzone">
        <label className="field">
          Bank transactions (CSV)
          <input type="file" name="file" accept=".csv,text/csv" required />
        </label>
        <p className="small muted" style={{ marginBottom: 0 }}>
          Columns: <code>date</code> (2026-01-31), <code>amount</code>, <code>currency</code> (EUR, USD…), <code>counterparty</code>,{" "}
          <code>description</code>. Comma or semicolon separated, UTF-8. Up to {maxBytesLabel} and {maxRows} rows.
        </p>
      </div>
      <div aria-live="assertive">{error ? <p className="form-error" role="alert">{error}</p> : null}</div>
      <div>
        <button type="submit" disabled={pending}>
          {pending ? "Uploading…" : "Upload and import"}
        </button>
      </div>
    </form>
  );
}
