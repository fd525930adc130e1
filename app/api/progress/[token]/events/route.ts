import { route } from "@/lib/http/api";
import { clientAddress } from "@/lib/security/client-address";
import { progressEventsResponse } from "@/lib/progress/stream";

export const dynamic = "force-dynamic";

/** Public, as the page: server-sent events of that one job's progress, until it ends. */
export const GET = route<{ params: Promise<{ token: string }> }>(
  "public",
  async (request, { params }) => progressEventsResponse(request, (await params).token, await clientAddress()),
  "GET /api/progress/:token/events",
);
