import { parseQuery, route } from "@/lib/http/api";
import { getLimiterReport, limiterQuerySchema } from "@/lib/reports/ratelimit";

export const dynamic = "force-dynamic";

/**
 * Viewer: what `/limiter` shows, in production units — reschedules over time by queue and family
 * (`?range=1h|24h|7d`, default 24h), top tenants by time lost, bucket specs and current states,
 * delayed jobs with their wake-up times, and each provider's shared limits (`providers`: in flight
 * of C, tokens of the burst at R per second, waits and production seconds waited, and
 * `tokenLimits`: the model's tokens per minute, configured or learnt from the provider's headers,
 * available now, the provider's last announced remaining and reset, and a 429's pause).
 */
export const GET = route(
  "viewer",
  async (request) => Response.json(await getLimiterReport(parseQuery(request, limiterQuerySchema))),
  "GET /api/limiter",
);
