import { z } from "zod";
import { env } from "@/lib/env";
import { createJob } from "@/lib/jobs/create";
import { tenantSlugSchema } from "@/lib/tenants/slug";
import { inspectUpload, normalizeLineEndings, type UploadRejection } from "./inspect-upload";

/** A file name as shown back to people: control characters dropped, at most 255 characters. */
const filenameSchema = z
  .string()
  .trim()
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it drops
  .transform((s) => s.replace(/[\u0000-\u001f\u007f]/g, "").slice(0, 255) || "upload.csv");

export type CreateImportResult =
  | { type: "created"; jobId: string; progressToken: string; rows: number }
  | { type: "rejected"; status: 413 | 415 | 422; code: UploadRejection; message: string };

export function uploadLimits() {
  return { maxBytes: env().BOUNDED_UPLOAD_MAX_BYTES, maxRows: env().BOUNDED_UPLOAD_MAX_ROWS };
}

/**
 * A CSV import: the file is checked whole before anything is created, then the Job row and the
 * stored file are written in one transaction and the queue job is added.
 */
export async function createImport(input: {
  tenant: string;
  filename: string;
  bytes: Uint8Array;
  /** The trace the import's run continues. @defaultValue the current request's */
  traceparent?: string;
}): Promise<CreateImportResult> {
  const tenantSlug = tenantSlugSchema.parse(input.tenant);
  const filename = filenameSchema.parse(input.filename);
  const bytes = normalizeLineEndings(input.bytes);
  const inspection = inspectUpload(bytes, uploadLimits());
  if (!inspection.ok)
    return { type: "rejected", status: inspection.status, code: inspection.code, message: inspection.message };

  const { jobId, progressToken } = await createJob({
    kind: "csv_import",
    tenantSlug,
    total: inspection.rows,
    traceparent: input.traceparent,
    extra: (tx, id) =>
      tx.upload
        .create({
          data: {
            jobId: id,
            filename,
            delimiter: inspection.delimiter,
            sizeBytes: bytes.byteLength,
            content: Buffer.from(bytes),
          },
        })
        .then(() => undefined),
  });
  return { type: "created", jobId, progressToken, rows: inspection.rows };
}
