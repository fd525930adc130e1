import { errorResponse, route } from "@/lib/http/api";
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
    return Response.json(job);
  },
  "GET /api/jobs/:id",
);
