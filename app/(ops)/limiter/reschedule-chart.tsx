"use client";

import { Bar, BarChart, CartesianGrid, Legend, Tooltip, XAxis, YAxis } from "recharts";
import { AXIS, GRID, LEGEND, axisTitle } from "../../components/chart-theme";
import styles from "./limiter.module.css";

/** One bar: reschedules in one step of the window, per series (`queue · family`). A plain DTO. */
export interface ChartPoint {
  at: string;
  counts: Record<string, number>;
}

const PALETTE = ["#2458d3", "#d08a00", "#2f8f5b", "#8e44ad", "#c0392b", "#16a085"];

function tickLabel(iso: string, stepSeconds: number): string {
  const d = new Date(iso);
  const hm = d.toISOString().slice(11, 16);
  return stepSeconds >= 3600 ? `${d.toISOString().slice(5, 10)} ${hm}` : hm;
}

/**
 * Reschedules per step of the window, stacked by queue and endpoint family. The same numbers are
 * in the text summary beside it.
 */
export function RescheduleChart({
  points,
  series,
  stepSeconds,
  label,
}: {
  points: ChartPoint[];
  series: string[];
  stepSeconds: number;
  label: string;
}) {
  const data = points.map((p) => ({ at: p.at, ...Object.fromEntries(series.map((s) => [s, p.counts[s] ?? 0])) }));
  return (
    <div className={styles.chart} role="img" aria-label={label} data-testid="reschedule-chart">
      <BarChart
        responsive
        style={{ width: "100%", height: "100%" }}
        data={data}
        margin={{ top: 16, right: 16, bottom: 8, left: 8 }}
        barCategoryGap={1}
      >
        <CartesianGrid {...GRID} />
        <XAxis dataKey="at" tickFormatter={(v: string) => tickLabel(v, stepSeconds)} minTickGap={24} {...AXIS} />
        <YAxis allowDecimals={false} {...AXIS} width={40} label={axisTitle("reschedules")} />
        <Tooltip
          labelFormatter={(v) => `${new Date(String(v)).toISOString().replace("T", " ").slice(0, 16)} UTC`}
          isAnimationActive={false}
        />
        <Legend {...LEGEND} />
        {series.map((s, i) => (
          <Bar
            key={s}
            dataKey={s}
            name={s}
            stackId="reschedules"
            fill={PALETTE[i % PALETTE.length]}
            isAnimationActive={false}
          />
        ))}
      </BarChart>
    </div>
  );
}
