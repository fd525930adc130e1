import { errorResponse } from "@/lib/http/api";
import { downloadFilename, importForDownload } from "@/lib/imports/result-csv";

/**
 * One answer for both downloads: the progress link is the only key (an unknown link is a 404,
 * whatever its shape), the file streams, and the browser saves it under the upload's name.
 */
export async function csvDownload(
  token: string,
  suffix: string,
  body: (jobId: string) => Promise<ReadableStream<Uint8Array>>,
): Promise<Response> {
  const found = await importForDownload(token);
  if (!found.ok) return errorResponse(found.status, found.code, found.message);
  const filename = downloadFilename(found.job.filename, suffix);
  return new Response(await body(found.job.id), {
    headers: {
      "Content-Type": "text/csv; charset=utf-8",
      "Content-Disposition": `attachment; filename="${filename}"`,
      "Cache-Control": "no-store",
      "X-Content-Type-Options": "nosniff",
    },
  });
}
