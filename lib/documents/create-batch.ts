import { tenantSlugSchema } from "@/lib/tenants/slug";
import { createJob } from "@/lib/jobs/create";
import { inspectDocuments, type DocumentRejection, type UploadedDocument } from "./inspect-documents";
import { documentLimits, type DocumentLimits } from "./settings";

export type CreateDocumentBatchResult =
  | { type: "created"; jobId: string; progressToken: string; files: number }
  | { type: "rejected"; status: 413 | 415 | 422; code: DocumentRejection; message: string };

/** A file name as people see it on the progress page: no control characters, at most 255 characters. */
function cleanFilename(name: string, number: number): string {
  const cleaned = name
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it drops
    .replace(/[\u0000-\u001f\u007f]/g, "")
    .replace(/^.*[\\/]/, "")
    .trim()
    .slice(0, 255);
  return cleaned || `document-${number}`;
}

/**
 * A `bulk_ocr` batch: every file is checked before anything is created (count, total size, each
 * file's size, emptiness and type); then the Job row and one JobFile per document (numbered
 * 1…n, the number the progress page shows) are written in one transaction and the queue job is
 * added. A refused batch leaves nothing behind.
 */
export async function createDocumentBatch(input: {
  tenant: string;
  files: UploadedDocument[];
  /** @defaultValue `documentLimits()` */
  limits?: DocumentLimits;
}): Promise<CreateDocumentBatchResult> {
  const tenantSlug = tenantSlugSchema.parse(input.tenant);
  const files = input.files.map((f, i) => ({ ...f, filename: cleanFilename(f.filename, i + 1) }));
  const inspection = inspectDocuments(files, input.limits ?? documentLimits());
  if (!inspection.ok)
    return { type: "rejected", status: inspection.status, code: inspection.code, message: inspection.message };

  const { jobId, progressToken } = await createJob({
    kind: "bulk_ocr",
    tenantSlug,
    total: inspection.files.length,
    params: { files: inspection.files.length, totalBytes: inspection.totalBytes },
    extra: async (tx, id) => {
      await tx.jobFile.createMany({
        data: inspection.files.map((f, i) => ({
          jobId: id,
          index: i + 1,
          filename: f.filename,
          contentType: f.contentType,
          sizeBytes: f.bytes.byteLength,
          content: Buffer.from(f.bytes),
        })),
      });
    },
  });
  return { type: "created", jobId, progressToken, files: inspection.files.length };
}
