import type { FormEvent, ReactNode } from "react";

/**
 * The public upload form: the tenant, a drop zone with the file input and what it accepts, the
 * error announced as it appears, and a submit button that says while the upload runs.
 */
export function UploadFormShell({
  onSubmit,
  error,
  pending,
  submitLabel,
  fileInput,
  hint,
}: {
  onSubmit: (event: FormEvent<HTMLFormElement>) => void;
  error: string | null;
  pending: boolean;
  submitLabel: string;
  /** The labelled file input. */
  fileInput: ReactNode;
  /** What may be uploaded, under the input. */
  hint: ReactNode;
}) {
  return (
    <form onSubmit={onSubmit} className="form-stack" noValidate>
      <label className="field">
        Your account (tenant)
        <input type="text" name="tenant" required placeholder="e.g. acme" autoComplete="organization" />
      </label>
      <div className="dropzone">
        {fileInput}
        <p className="small muted" style={{ marginBottom: 0 }}>
          {hint}
        </p>
      </div>
      <div aria-live="assertive">
        {error ? (
          <p className="form-error" role="alert">
            {error}
          </p>
        ) : null}
      </div>
      <div>
        <button type="submit" disabled={pending}>
          {pending ? "Uploading…" : submitLabel}
        </button>
      </div>
    </form>
  );
}
