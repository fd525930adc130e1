import { route } from "@/lib/http/api";
import { failedRowsCsv } from "@/lib/imports/result-csv";
import { csvDownload } from "../downloads";

export const dynamic = "force-dynamic";

/** Public: an import's failed rows as uploaded, with a reason column, for whoever holds its progress link. */
export const GET = route<{ params: Promise<{ token: string }> }>(
  "public",
  async (_request, { params }) => csvDownload((await params).token, "failed-rows", (jobId) => failedRowsCsv(jobId)),
  "GET /api/progress/:token/failed-rows.csv",
);
