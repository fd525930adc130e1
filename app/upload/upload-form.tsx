"use client";

import { isChosenFile, useUpload } from "../components/use-upload";
import { UploadFormShell } from "../components/upload-form-shell";

export function UploadForm({ maxBytesLabel, maxRows }: { maxBytesLabel: string; maxRows: string }) {
  const { error, pending, onSubmit } = useUpload("/api/imports", (form) =>
    isChosenFile(form.get("file")) ? null : "Choose a CSV file to upload.",
  );

  return (
    <UploadFormShell
      onSubmit={onSubmit}
      error={error}
      pending={pending}
      submitLabel="Upload and import"
      fileInput={
        <label className="field">
          Bank transactions (CSV)
          <input type="file" name="file" accept=".csv,text/csv" required />
        </label>
      }
      hint={
        <>
          Columns: <code>date</code> (2026-01-31), <code>amount</code>, <code>currency</code> (EUR, USD…),{" "}
          <code>counterparty</code>, <code>description</code>. Comma or semicolon separated, UTF-8. Up to{" "}
          {maxBytesLabel} and {maxRows} rows.
        </>
      }
    />
  );
}
