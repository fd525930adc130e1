import { errorResponse, parseQuery, route } from "@/lib/http/api";
import { planSplit, splitRequestSchema } from "@/lib/jobs/split";
import { describeSplit } from "@/lib/jobs/split-messages";

export const dynamic = "force-dynamic";

/** Operator: the proposed split of a job (`?parts=` to see another k), with its arithmetic. Changes nothing. */
export const GET = route<{ params: Promise<{ id: string }> }>(
  "operator",
  async (request, { params }) => {
    const { id } = await params;
    const r = await planSplit(id, parseQuery(request, splitRequestSchema.strip()));
    if (r.type !== "plan") {
      const d = describeSplit(r);
      return errorResponse(d.status, d.code, d.message);
    }
    return Response.json(r.plan);
  },
  "GET /api/jobs/:id/split-plan",
);
