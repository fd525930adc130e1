import { errorResponse, route } from "@/lib/http/api";
import { getJob } from "@/lib/jobs/queries";

export const dynamic = "force-dynamic";

export const GET = route<{ params: Promise<{ id: string }> }>(
  "viewer",
  async (_request, { params }) => {
    const job = await getJob((await params).id);
    if (!job) return errorResponse(404, "not_found", "No job with this id.");
    return Response.json(job);
  },
  "GET /api/jobs/:id",
);
