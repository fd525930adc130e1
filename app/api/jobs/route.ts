import { parseQuery, route } from "@/lib/http/api";
import { jobFilterSchema, listJobs } from "@/lib/job-views/queries";

export const dynamic = "force-dynamic";

export const GET = route(
  "viewer",
  async (request) => Response.json(await listJobs(parseQuery(request, jobFilterSchema))),
  "GET /api/jobs",
);
