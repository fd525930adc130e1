"use client";

import { Bar, BarChart, CartesianGrid, Legend, ReferenceLine, Tooltip, XAxis, YAxis } from "recharts";
import { formatDuration } from "@/lib/format/duration";
import { AXIS, GRID, LEGEND, axisTitle } from "../../components/chart-theme";
import styles from "./reserves.module.css";

const COLORS = { generate: "#2458d3", dislike: "#d08a00" } as const;

/** One minute of age (production time) with the live reserves of each kind in it. */
export interface AgeBucket {
  fromMin: number;
  generate: number;
  dislike: number;
}

/**
 * Live reserves by age, with the computed worst case of a generation and the sweep window as
 * vertical lines: a bar right of the window that still heartbeats is a slow generation, kept.
 */
export function AgeChart({
  buckets,
  worstCaseMin,
  windowMin,
  label,
}: {
  buckets: AgeBucket[];
  worstCaseMin: number;
  windowMin: number;
  label: string;
}) {
  const data = buckets.map((b) => ({ ...b, x: b.fromMin + 0.5 }));
  const last = buckets.at(-1)?.fromMin ?? 35;
  return (
    <div className={styles.chart} role="img" aria-label={label} data-testid="age-chart">
      <BarChart
        responsive
        style={{ width: "100%", height: "100%" }}
        data={data}
        margin={{ top: 28, right: 24, bottom: 8, left: 8 }}
        barCategoryGap={1}
      >
        <CartesianGrid {...GRID} />
        <XAxis
          dataKey="x"
          type="number"
          domain={[0, last + 1]}
          ticks={Array.from({ length: Math.floor(last / 5) + 1 }, (_, i) => i * 5)}
          tickFormatter={(m: number) => (m >= last ? `${m}+ min` : `${m} min`)}
          {...AXIS}
        />
        <YAxis allowDecimals={false} {...AXIS} width={48} label={axisTitle("live reserves")} />
        <Tooltip isAnimationActive={false} labelFormatter={(x) => `${Number(x) - 0.5}–${Number(x) + 0.5} min old`} />
        <Legend {...LEGEND} />
        <Bar dataKey="generate" name="generate" stackId="kind" fill={COLORS.generate} isAnimationActive={false} />
        <Bar dataKey="dislike" name="dislike" stackId="kind" fill={COLORS.dislike} isAnimationActive={false} />
        <ReferenceLine
          x={worstCaseMin}
          stroke="#5b6270"
          strokeWidth={2}
          strokeDasharray="6 4"
          label={{
            value: `worst case ${formatDuration(worstCaseMin * 60_000)}`,
            position: "top",
            fill: "#5b6270",
            fontSize: 12,
          }}
        />
        <ReferenceLine
          x={windowMin}
          stroke="#c0392b"
          strokeWidth={2}
          label={{
            value: `sweep window ${formatDuration(windowMin * 60_000)}`,
            position: "top",
            fill: "#c0392b",
            fontSize: 12,
            offset: 14,
          }}
        />
      </BarChart>
    </div>
  );
}

/** Reserves the sweeper took back, per hour and kind, over the last day. */
export function ReclaimedChart({
  hours,
  label,
}: {
  hours: { hour: string; generate: number; dislike: number }[];
  label: string;
}) {
  const data = hours.map((h) => ({ ...h, label: `${h.hour.slice(11, 13)}:00` }));
  return (
    <div className={styles["small-chart"]} role="img" aria-label={label} data-testid="reclaimed-chart">
      <BarChart
        responsive
        style={{ width: "100%", height: "100%" }}
        data={data}
        margin={{ top: 12, right: 24, bottom: 8, left: 8 }}
      >
        <CartesianGrid {...GRID} />
        <XAxis dataKey="label" interval={2} {...AXIS} tickFormatter={(h: string) => `${h} UTC`} />
        <YAxis allowDecimals={false} {...AXIS} width={48} label={axisTitle("reclaimed")} />
        <Tooltip isAnimationActive={false} />
        <Legend {...LEGEND} />
        <Bar dataKey="generate" name="generate" stackId="kind" fill={COLORS.generate} isAnimationActive={false} />
        <Bar dataKey="dislike" name="dislike" stackId="kind" fill={COLORS.dislike} isAnimationActive={false} />
      </BarChart>
    </div>
  );
}
