import { route } from "@/lib/http/api";
import { checkReadiness } from "@/lib/reports/health";

export const dynamic = "force-dynamic";

/**
 * Public readiness (the Kubernetes meaning): PostgreSQL, Redis, every migration applied, a live
 * worker for each queue. 200 `{ status, checks }`, or 503 with `failed` naming what is not ready.
 * Each check has its own short time limit, so the answer comes within 2 s even when a dependency hangs.
 */
export const GET = route(
  "public",
  async () => {
    const { ok, checks, failed } = await checkReadiness();
    return Response.json(ok ? { status: "ready", checks } : { status: "not_ready", failed, checks }, {
      status: ok ? 200 : 503,
      headers: { "Cache-Control": "no-store" },
    });
  },
  "GET /api/readyz",
);
