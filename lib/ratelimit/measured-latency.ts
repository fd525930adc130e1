import { redis as sharedRedis, type RedisClient } from "@/lib/redis/client";
import type { OutsideService } from "./breaker-services";
import { breakerKey } from "./breaker";
import { silenceKeys } from "./silence";

/**
 * How long a service's calls take now: read from the latencies its silence detection keeps (the
 * last 200 answered calls of every process, real ms; ./silence.lua), so every worker judges a
 * provider by the same recent calls. Read at most once per `CACHE_MS` per service in a process:
 * a call's decision costs no round trip.
 */

/** A service's recent answers: the median and the 90th percentile, real ms. */
export interface MeasuredLatency {
  p50Ms: number;
  p90Ms: number;
  samples: number;
}

/** Fewer answers than this say nothing yet: the decision is left to the outage alone. */
export const LATENCY_SAMPLES_NEEDED = 20;
const CACHE_MS = 2_000;

const cache = new Map<OutsideService, { at: number; value: Promise<MeasuredLatency | null> }>();

/** The service's measured latency, or null while too few of its calls have been answered (or Redis does not answer). */
export function measuredLatency(
  service: OutsideService,
  client: () => RedisClient = sharedRedis,
  now = Date.now(),
): Promise<MeasuredLatency | null> {
  const hit = cache.get(service);
  if (hit && now - hit.at < CACHE_MS) return hit.value;
  const latencies = silenceKeys(service, breakerKey(service))[3]!;
  const value = client()
    .lrange(latencies, 0, -1)
    .then((values) => latencyOf(values.map(Number)))
    .catch(() => null);
  cache.set(service, { at: now, value });
  return value;
}

/** The median and 90th percentile of `values` (real ms), or null when there are too few. */
export function latencyOf(values: number[]): MeasuredLatency | null {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length < LATENCY_SAMPLES_NEEDED) return null;
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50Ms: at(0.5), p90Ms: at(0.9), samples: sorted.length };
}

/** Forgets what was read (tests). */
export function forgetMeasuredLatencies(): void {
  cache.clear();
}
