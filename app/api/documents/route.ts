import { createDocumentBatch } from "@/lib/documents/create-batch";
import type { UploadedDocument } from "@/lib/documents/inspect-documents";
import { documentLimits } from "@/lib/documents/settings";
import { errorResponse, route } from "@/lib/http/api";
import { parseMultipart, readBodyLimited } from "@/lib/http/body";
import { ApiError } from "@/lib/http/errors";
import { withRequestUploadSlot } from "@/lib/http/uploader";
import { EnqueueFailed } from "@/lib/jobs/create";

export const dynamic = "force-dynamic";

/** Room for the multipart envelope around up to 95 files. */
const MULTIPART_OVERHEAD = 256 * 1024;

/**
 * Public (end users upload here): multipart `tenant` + `files` (1–95 documents: PDF, PNG, JPEG,
 * TIFF or plain text) → 201 { jobId, progressToken, progressUrl, files }. A refused batch
 * (413 / 415 / 422, naming the file) creates nothing.
 */
export const POST = route(
  "public",
  async (request) => {
    // Counted per caller: uploads per minute and in flight at once (lib/http/upload-limits.ts).
    return withRequestUploadSlot(request, documentLimits().maxTotalBytes, async () => {
      const limits = documentLimits();
      const contentType = (request.headers.get("content-type") ?? "").toLowerCase();
      if (!contentType.startsWith("multipart/form-data")) {
        throw new ApiError(
          415,
          "unsupported_media_type",
          "Send the documents as multipart/form-data with the fields `tenant` and `files` (one per document).",
        );
      }
      const body = await readBodyLimited(
        request,
        limits.maxTotalBytes + MULTIPART_OVERHEAD,
        "batch",
        "batch_too_large",
      );
      const form = await parseMultipart(
        body,
        request.headers.get("content-type")!,
        "Send multipart/form-data with the fields `tenant` and `files`.",
      );
      const entries = form.getAll("files");
      if (entries.some((entry) => !(entry instanceof File))) {
        throw new ApiError(422, "files_not_files", "The field `files` must carry files, not text.");
      }
      const files: UploadedDocument[] = await Promise.all(
        (entries as File[]).map(async (file) => ({
          filename: file.name,
          bytes: new Uint8Array(await file.arrayBuffer()),
        })),
      );

      try {
        const result = await createDocumentBatch({ tenant: String(form.get("tenant") ?? ""), files, limits });
        if (result.type === "rejected") return errorResponse(result.status, result.code, result.message);
        const progressUrl = `/progress/${result.progressToken}`;
        return Response.json(
          { jobId: result.jobId, progressToken: result.progressToken, progressUrl, files: result.files },
          { status: 201, headers: { Location: progressUrl } },
        );
      } catch (err) {
        if (err instanceof EnqueueFailed) {
          throw new ApiError(
            503,
            "queue_unavailable",
            "Documents cannot be accepted right now (the job queue is unavailable). Nothing was saved; try again in a minute.",
          );
        }
        throw err;
      }
    });
  },
  "POST /api/documents",
);
