import { route } from "@/lib/http/api";

export const dynamic = "force-dynamic";

/**
 * Public liveness (the Kubernetes meaning): the process is up and answers. No dependency is
 * checked — a PostgreSQL or Redis outage must not get every web process restarted; readiness
 * (`/api/readyz`) takes it out of the load balancer instead.
 */
export const GET = route(
  "public",
  async () => Response.json({ status: "live" }, { headers: { "Cache-Control": "no-store" } }),
  "GET /api/livez",
);
