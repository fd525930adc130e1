import type { JobForensics } from "@/lib/reports/forensics";
import type { LatencySummary, PercentileEstimate } from "@/lib/modelcalls/buckets";
import type { CallList, LatencyHistogram } from "@/lib/modelcalls/queries";
import { unscaled } from "@/lib/time";

/**
 * Recorded call durations are measured in the process's time (`durationMs`, the rollup's buckets):
 * at `BOUNDED_TIME_SCALE` 0.1 a median model call of 5.5 s takes 550 ms. What /model-calls, its
 * call lists, a job's timeline and `GET /api/model-calls/histogram` show is production time, the
 * unit of the budgets they are drawn against: these map every
 * duration of a read to it (`ms ÷ scale`). Buckets keep their index, so a bar still lists the calls
 * it counts; at scale 1 nothing changes.
 */

const production = (ms: number, scale: number | undefined) => Math.round(unscaled(ms, scale));
const nullable = (ms: number | null, scale: number | undefined) => (ms === null ? null : production(ms, scale));

function estimate(e: PercentileEstimate | null, scale: number | undefined): PercentileEstimate | null {
  return (
    e && {
      ...e,
      ms: production(e.ms, scale),
      lowerMs: production(e.lowerMs, scale),
      upperMs: nullable(e.upperMs, scale),
    }
  );
}

function summary(s: LatencySummary, scale: number | undefined): LatencySummary {
  return {
    ...s,
    p50: estimate(s.p50, scale),
    p90: estimate(s.p90, scale),
    p99: estimate(s.p99, scale),
    maxMs: nullable(s.maxMs, scale),
    meanMs: nullable(s.meanMs, scale),
  };
}

/**
 * A latency histogram with its bucket edges, percentiles, max and mean in production milliseconds.
 * @param scale - the time scale the calls were recorded at. @defaultValue `env().BOUNDED_TIME_SCALE`
 */
export function histogramInProductionTime(h: LatencyHistogram, scale?: number): LatencyHistogram {
  return {
    ...h,
    buckets: h.buckets.map((b) => ({
      ...b,
      lowerMs: production(b.lowerMs, scale),
      upperMs: nullable(b.upperMs, scale),
    })),
    summary: summary(h.summary, scale),
    tools: summary(h.tools, scale),
  };
}

/**
 * A list of calls with their durations and the bucket's edges in production milliseconds.
 * @param scale - the time scale the calls were recorded at. @defaultValue `env().BOUNDED_TIME_SCALE`
 */
export function callListInProductionTime(list: CallList, scale?: number): CallList {
  return {
    ...list,
    calls: list.calls.map((c) => ({ ...c, durationMs: production(c.durationMs, scale) })),
    bucket: list.bucket && {
      ...list.bucket,
      lowerMs: production(list.bucket.lowerMs, scale),
      upperMs: nullable(list.bucket.upperMs, scale),
    },
  };
}

/**
 * A job's timeline with its calls' durations, medians and maxima in production milliseconds.
 * @param scale - the time scale the calls were recorded at. @defaultValue `env().BOUNDED_TIME_SCALE`
 */
export function forensicsInProductionTime(f: JobForensics, scale?: number): JobForensics {
  return {
    ...f,
    calls: f.calls.map((c) => ({ ...c, p50Ms: production(c.p50Ms, scale), maxMs: production(c.maxMs, scale) })),
    entries: f.entries.map((e) => (e.kind === "call" ? { ...e, durationMs: production(e.durationMs, scale) } : e)),
  };
}
