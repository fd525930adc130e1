import { errorResponse, route } from "@/lib/http/api";
import { getJobAnswerReuse } from "@/lib/answers/stats";
import { getJob } from "@/lib/job-views/queries";
import { detailRemovedMessage } from "@/lib/jobs/messages";

export const dynamic = "force-dynamic";

export const GET = route<{ params: Promise<{ id: string }> }>(
  "viewer",
  async (_request, { params }) => {
    const job = await getJob((await params).id);
    if (!job) return errorResponse(404, "not_found", "No job with this id.");
    if (job.detailPrunedAt)
      return errorResponse(410, "job_detail_removed", detailRemovedMessage(new Date(job.detailPrunedAt)));
    // Which model answered how many rows (an import's; with failover, a fallback's rows apart).
    const answeredBy = job.kind === "csv_import" ? (await getJobAnswerReuse(job.id)).byModel : [];
    return Response.json({ ...job, answeredBy });
  },
  "GET /api/jobs/:id",
);
