import { route } from "@/lib/http/api";
import { progressResponse } from "@/lib/progress/respond";

export const dynamic = "force-dynamic";

/**
 * Public: the progress token is the capability; it shows that one job, in the customer's words,
 * and nothing else. Answered from the job's stored snapshot, with an ETag (304 when unchanged).
 */
export const GET = route<{ params: Promise<{ token: string }> }>(
  "public",
  async (request, { params }) => progressResponse(request, (await params).token),
  "GET /api/progress/:token",
);
