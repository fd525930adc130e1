import { parseQuery, route } from "@/lib/http/api";
import { histogramInProductionTime } from "@/lib/reports/production-time";
import { getCallAllowance } from "@/lib/modelcalls/allowance";
import { getLatencyHistogram, latencyHistogramQuerySchema } from "@/lib/modelcalls/queries";

export const dynamic = "force-dynamic";

/**
 * `GET /api/model-calls/histogram?range=1h|24h|7d|30d&queue=&kind=&model=&type=model|ocr|tool` —
 * what the /model-calls page draws: buckets, percentiles, outcomes, tool calls beside them, filter
 * options, and `callAllowance` when a kind is given (else null). Bad params: 422.
 */
export const GET = route(
  "viewer",
  async (request) => {
    const query = parseQuery(request, latencyHistogramQuerySchema);
    const [histogram, callAllowance] = await Promise.all([
      getLatencyHistogram(query).then((recorded) => histogramInProductionTime(recorded)),
      query.kind ? getCallAllowance(query.kind, query.queue) : Promise.resolve(null),
    ]);
    return Response.json({ ...histogram, callAllowance }, { headers: { "Cache-Control": "no-store" } });
  },
  "GET /api/model-calls/histogram",
);
