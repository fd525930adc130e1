import { route } from "@/lib/http/api";
import { renderMetrics } from "@/lib/metrics/publish";

export const dynamic = "force-dynamic";

/**
 * `GET /api/metrics` — public, Prometheus text format: this web process's registry merged with
 * the snapshot every live worker publishes to Redis (see lib/metrics/publish.ts for how counters,
 * histograms and gauges are aggregated).
 */
export const GET = route(
  "public",
  async () => {
    const { contentType, text } = await renderMetrics();
    return new Response(text, { headers: { "Content-Type": contentType, "Cache-Control": "no-store" } });
  },
  "GET /api/metrics",
);
