"use client";

import { useRouter } from "next/navigation";
import { useState, type FormEvent } from "react";

export function UploadForm({ maxBytesLabel, maxRows }: { maxBytesLabel: string; maxRows: string }) {
  const router = useRouter();
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  async function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setError(null);
    const form = new FormData(event.currentTarget);
    const file = form.get("file");
    if (!(file instanceof File) || file.size === 0 && file.name === "") {
      setError("Choose a CSV file to upload.");
      return;
    }
    setPending(true);
    try {
      const response = await fetch("/api/imports", { method: "POST", body: form });
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
