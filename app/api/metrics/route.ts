import { z } from "zod";
import { parseQuery, route } from "@/lib/http/api";
import { METRICS_SOURCES, renderMetrics } from "@/lib/reports/metrics-publish";

export const dynamic = "force-dynamic";

const metricsQuerySchema = z.object({ sources: z.enum(METRICS_SOURCES).default("all") });

/**
 * `GET /api/metrics[?sources=all|web|workers]` — public, Prometheus text format: this web
 * process's registry and the snapshot every live worker publishes to Redis, each series labelled
 * with its `process` (see lib/reports/metrics-publish.ts). `sources` narrows it to one side (ops/README.md:
 * several web instances). A bad value: 422.
 */
export const GET = route(
  "public",
  async (request) => {
    const { sources } = parseQuery(request, metricsQuerySchema);
    const { contentType, text } = await renderMetrics({ sources });
    return new Response(text, { headers: { "Content-Type": contentType, "Cache-Control": "no-store" } });
  },
  "GET /api/metrics",
);
