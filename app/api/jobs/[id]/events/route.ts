import { route } from "@/lib/http/api";
import { jobEventsResponse } from "@/lib/progress/operator";
import { clientAddress } from "@/lib/security/client-address";

export const dynamic = "force-dynamic";

/** Operators: server-sent events of the job page's facts (status, counts, pace, time left), until the job ends. */
export const GET = route<{ params: Promise<{ id: string }> }>(
  "operator",
  async (request, { params }) => jobEventsResponse(request, (await params).id, await clientAddress()),
  "GET /api/jobs/:id/events",
);
