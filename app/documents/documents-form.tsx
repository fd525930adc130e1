"use client";

import { isChosenFile, useUpload } from "../components/use-upload";
import { UploadFormShell } from "../components/upload-form-shell";

export function DocumentsForm(props: {
  maxFiles: number;
  maxFileLabel: string;
  maxTotalLabel: string;
  typesLabel: string;
}) {
  const { error, pending, onSubmit } = useUpload("/api/documents", (form) => {
    const files = form.getAll("files").filter(isChosenFile);
    if (files.length === 0) return "Choose at least one document to upload.";
    if (files.length > props.maxFiles)
      return `You chose ${files.length} documents; the limit is ${props.maxFiles} per batch. Split them into smaller batches.`;
    return null;
  });

  return (
    <UploadFormShell
      onSubmit={onSubmit}
      error={error}
      pending={pending}
      submitLabel="Upload and read"
      fileInput={
        <label className="field">
          Documents
          <input
            type="file"
            name="files"
            multiple
            required
            accept=".pdf,.png,.jpg,.jpeg,.tif,.tiff,.txt,application/pdf,image/png,image/jpeg,image/tiff,text/plain"
          />
        </label>
      }
      hint={
        <>
          {props.typesLabel}. Up to {props.maxFiles} documents, {props.maxFileLabel} each and {props.maxTotalLabel}{" "}
          together.
        </>
      }
    />
  );
}
