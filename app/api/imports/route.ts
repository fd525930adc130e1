import { createImport, uploadLimits } from "@/lib/imports/create-import";
import { parseMultipart, readBodyLimited } from "@/lib/http/body";
import { EnqueueFailed } from "@/lib/jobs/create";
import { errorResponse, route } from "@/lib/http/api";
import { ApiError } from "@/lib/http/errors";
import { withRequestUploadSlot } from "@/lib/http/uploader";

export const dynamic = "force-dynamic";

/** Room for the multipart envelope around the file. */
const MULTIPART_OVERHEAD = 64 * 1024;

/**
 * Public (end users upload here): multipart `file` + `tenant`, or a `text/csv` body with
 * `?tenant=`. → 201 { jobId, progressToken, progressUrl }.
 */
export const POST = route(
  "public",
  async (request) => {
    // Counted per caller: uploads per minute and in flight at once (lib/http/upload-limits.ts).
    return withRequestUploadSlot(request, uploadLimits().maxBytes, async () => {
      const { maxBytes } = uploadLimits();
      const contentType = (request.headers.get("content-type") ?? "").toLowerCase();
      let tenant: string;
      let filename: string;
      let bytes: Uint8Array;
      if (contentType.startsWith("multipart/form-data")) {
        const body = await readBodyLimited(request, maxBytes + MULTIPART_OVERHEAD, "upload", "file_too_large");
        const form = await parseMultipart(
          body,
          request.headers.get("content-type")!,
          "Send the file as multipart/form-data with a `file` field.",
        );
        const file = form.get("file");
        if (!(file instanceof File))
          throw new ApiError(422, "file_missing", "Choose a CSV file to upload (form field `file`).");
        tenant = String(form.get("tenant") ?? "");
        filename = file.name;
        bytes = new Uint8Array(await file.arrayBuffer());
      } else if (contentType.startsWith("text/csv") || contentType.startsWith("text/plain")) {
        tenant = new URL(request.url).searchParams.get("tenant") ?? "";
        filename = new URL(request.url).searchParams.get("filename") ?? "upload.csv";
        // One byte over the limit is enough for the file checks to say how large it is.
        bytes = await readBodyLimited(request, maxBytes + 1, "file", "file_too_large");
      } else {
        throw new ApiError(
          415,
          "unsupported_media_type",
          "Send the file as multipart/form-data (fields `file` and `tenant`) or as a text/csv body with ?tenant=.",
        );
      }

      try {
        const result = await createImport({ tenant, filename, bytes });
        if (result.type === "rejected") return errorResponse(result.status, result.code, result.message);
        const progressUrl = `/progress/${result.progressToken}`;
        return Response.json(
          { jobId: result.jobId, progressToken: result.progressToken, progressUrl, rows: result.rows },
          { status: 201, headers: { Location: progressUrl } },
        );
      } catch (err) {
        if (err instanceof EnqueueFailed)
          throw new ApiError(
            503,
            "queue_unavailable",
            "Imports cannot be accepted right now (the job queue is unavailable). Nothing was saved; try again in a minute.",
          );
        throw err;
      }
    });
  },
  "POST /api/imports",
);
