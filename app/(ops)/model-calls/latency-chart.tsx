"use client";

import { useRouter } from "next/navigation";
import {
  Bar,
  BarChart,
  CartesianGrid,
  Legend,
  ReferenceLine,
  Tooltip,
  XAxis,
  YAxis,
  type TooltipContentProps,
} from "recharts";
import { CALL_OUTCOMES, type CallOutcome } from "@/lib/core/call-outcomes";
import { BUCKET_COUNT, logPosition } from "@/lib/modelcalls/buckets";
import { formatDuration, formatDurationRounded } from "@/lib/format/duration";
import { AXIS, GRID, LEGEND } from "../../components/chart-theme";
import { OUTCOME_COLOR } from "../../components/outcome-badge";
import { AXIS_TICKS_MS } from "./format";
import styles from "./model-calls.module.css";
import { formatCount } from "@/lib/format/number";

/** One bar: a latency bucket with its calls per outcome (a plain DTO from the server page). */
export interface ChartBucket {
  bucket: number;
  lowerMs: number;
  upperMs: number | null;
  ok: number;
  error: number;
  aborted: number;
  superseded: number;
  /** The list of the calls this bar counts; null when there is none to show (empty bar, whole items). */
  href: string | null;
}

interface Point extends ChartBucket {
  /** Bucket b is drawn centred on b + 0.5 of a continuous log axis where it spans [b, b + 1). */
  x: number;
}

/**
 * The axis is the recorded buckets' (recorded time); its labels are production time, like every
 * duration the chart shows: a production duration sits where `ms × timeScale` was recorded.
 */
function axisTicks(timeScale: number) {
  return AXIS_TICKS_MS.map((t) => ({ ...t, x: logPosition(t.ms * timeScale) })).filter(
    (t) => t.x > 0 && t.x < BUCKET_COUNT,
  );
}

function BucketTooltip({ active, payload }: TooltipContentProps) {
  const p = payload?.[0]?.payload as Point | undefined;
  if (!active || !p) return null;
  const total = CALL_OUTCOMES.reduce((n, o) => n + p[o], 0);
  return (
    <div className={styles.tooltip}>
      <div>
        <strong>
          {p.bucket === 0
            ? `under ${formatDurationRounded(p.upperMs ?? 0)}`
            : p.upperMs === null
              ? `${formatDurationRounded(p.lowerMs)} and more`
              : `${formatDurationRounded(p.lowerMs)} – ${formatDurationRounded(p.upperMs)}`}
        </strong>
      </div>
      <div>
        {formatCount(total)} {total === 1 ? "call" : "calls"}
      </div>
      {CALL_OUTCOMES.map((o) =>
        p[o] > 0 ? (
          <div key={o} style={{ color: OUTCOME_COLOR[o] }}>
            {o}: {formatCount(p[o])}
          </div>
        ) : null,
      )}
      {p.href && total > 0 ? <div className="muted">Click the bar to list them</div> : null}
    </div>
  );
}

/**
 * Calls per log-spaced latency bucket, stacked by outcome, with the call allowance as a
 * vertical line. The numbers are also in the text summary beside it (for screen readers and
 * for people who want figures, not shapes). A bar opens the list of the calls it counts.
 */
export function LatencyChart({
  buckets,
  allowanceMs,
  timeScale,
  label,
}: {
  buckets: ChartBucket[];
  allowanceMs: number | null;
  timeScale: number;
  label: string;
}) {
  const data: Point[] = buckets.map((b) => ({ ...b, x: b.bucket + 0.5 }));
  const ticks = axisTicks(timeScale);
  const tickLabel = (x: number) => ticks.find((t) => Math.abs(t.x - x) < 1e-6)?.label ?? "";
  const budgetX = allowanceMs !== null ? logPosition(allowanceMs * timeScale) : null;
  const router = useRouter();
  // Every outcome's segment of a bar opens the same list: the bucket's calls, all outcomes.
  const open = (d: unknown) => {
    const href = (d as { payload?: Point } | undefined)?.payload?.href;
    if (href) router.push(href);
  };
  const clickable = data.some((b) => b.href !== null);
  return (
    <div className={styles.chart} role="img" aria-label={label} data-testid="latency-chart">
      <BarChart
        responsive
        style={{ width: "100%", height: "100%" }}
        data={data}
        margin={{ top: 24, right: 24, bottom: 8, left: 8 }}
        barCategoryGap={1}
      >
        <CartesianGrid {...GRID} />
        <XAxis
          dataKey="x"
          type="number"
          domain={[0, BUCKET_COUNT]}
          ticks={ticks.map((t) => t.x)}
          tickFormatter={tickLabel}
          interval={0}
          allowDataOverflow
          {...AXIS}
        />
        <YAxis allowDecimals={false} {...AXIS} width={48} />
        <Tooltip content={BucketTooltip} cursor={{ fill: "rgba(36, 88, 211, 0.06)" }} isAnimationActive={false} />
        <Legend {...LEGEND} itemSorter={(item) => CALL_OUTCOMES.indexOf(item.dataKey as CallOutcome)} />
        {CALL_OUTCOMES.map((o) => (
          <Bar
            key={o}
            dataKey={o}
            name={o}
            stackId="outcome"
            fill={OUTCOME_COLOR[o]}
            isAnimationActive={false}
            onClick={open}
            style={clickable ? { cursor: "pointer" } : undefined}
          />
        ))}
        {budgetX !== null && allowanceMs !== null ? (
          <ReferenceLine
            x={budgetX}
            stroke="#2458d3"
            strokeWidth={2}
            strokeDasharray="6 4"
            ifOverflow="extendDomain"
            label={{
              value: `call allowance ${formatDuration(allowanceMs)}`,
              position: "top",
              fill: "#2458d3",
              fontSize: 12,
            }}
          />
        ) : null}
      </BarChart>
    </div>
  );
}
