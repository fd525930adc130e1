import { formatDuration } from "@/lib/format/duration";
import { formatCount } from "@/lib/format/number";
import type { ProviderWaiting } from "@/lib/ratelimit/provider";

/** "2 tenants; 1 urgent call, its deadline in 45 s" (production time), or "nobody". */
export function describeWaiting(w: ProviderWaiting, asOf: string, timeScale: number): string {
  const tenants = w.tenants === 0 ? "" : `${formatCount(w.tenants)} ${w.tenants === 1 ? "tenant" : "tenants"}`;
  const urgent =
    w.urgent === 0
      ? ""
      : `${formatCount(w.urgent)} urgent ${w.urgent === 1 ? "call, its" : "calls, the nearest"} deadline ${
          w.nearestDeadlineAt === null || w.nearestDeadlineAt <= Date.parse(asOf)
            ? "passed"
            : `in ${formatDuration((w.nearestDeadlineAt - Date.parse(asOf)) / timeScale)}`
        }`;
  return [tenants, urgent].filter(Boolean).join("; ") || "nobody";
}
