import { z } from "zod";
import { parseQuery, route } from "@/lib/http/api";
import { getStuckOverview } from "@/lib/reports/stuck-groups";
import { STUCK_CAUSES } from "@/lib/diagnosis/stuck-causes";

export const dynamic = "force-dynamic";

const querySchema = z.object(
  Object.fromEntries(STUCK_CAUSES.map((c) => [c, z.coerce.number().int().min(1).max(10_000).optional()])) as Record<
    (typeof STUCK_CAUSES)[number],
    z.ZodOptional<z.ZodCoercedNumber>
  >,
);

/** What /stuck shows: each cause with its count and one page of its jobs (`?late_start=2` for that group's second page). */
export const GET = route(
  "viewer",
  async (request) => {
    const pages = parseQuery(request, querySchema);
    return Response.json(await getStuckOverview(pages));
  },
  "GET /api/stuck",
);
