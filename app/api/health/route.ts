import { checkHealth } from "@/lib/reports/health";

export const dynamic = "force-dynamic";

/** Public: load balancers and the start script poll it. 503 when PostgreSQL or Redis is down. */
export async function GET() {
  const { ok, ...health } = await checkHealth();
  return Response.json(health, { status: ok ? 200 : 503, headers: { "Cache-Control": "no-store" } });
}
