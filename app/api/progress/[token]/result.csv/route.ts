import { route } from "@/lib/http/api";
import { resultCsv } from "@/lib/imports/result-csv";
import { csvDownload } from "../downloads";

export const dynamic = "force-dynamic";

/** Public: an import's categorised rows, for whoever holds its progress link. */
export const GET = route<{ params: Promise<{ token: string }> }>(
  "public",
  async (_request, { params }) => csvDownload((await params).token, "result", (jobId) => resultCsv(jobId)),
  "GET /api/progress/:token/result.csv",
);
