import { errorResponse, route } from "@/lib/http/api";
import { getCustomerProgress } from "@/lib/jobs/customer-progress";

export const dynamic = "force-dynamic";

/** Public: the progress token is the capability; it shows that one job, in the customer's words, and nothing else. */
export const GET = route<{ params: Promise<{ token: string }> }>(
  "public",
  async (_request, { params }) => {
    const progress = await getCustomerProgress((await params).token);
    if (!progress) return errorResponse(404, "not_found", "No job has this progress link. Check the address.");
    return Response.json(progress, { headers: { "Cache-Control": "no-store" } });
  },
  "GET /api/progress/:token",
);
