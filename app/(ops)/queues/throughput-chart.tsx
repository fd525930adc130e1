"use client";

import { Area, AreaChart, Tooltip, XAxis, YAxis } from "recharts";
import { AXIS } from "../../components/chart-theme";
import styles from "./queues.module.css";

/**
 * Completed jobs per minute over the last hour, oldest minute first: a small area chart. The
 * numbers are in the text beside it.
 */
export function ThroughputChart({ perMinute, label, testId }: { perMinute: number[]; label: string; testId: string }) {
  const data = perMinute.map((n, i) => ({ ago: perMinute.length - 1 - i, n }));
  return (
    <div className={styles.chart} role="img" aria-label={label} data-testid={testId}>
      <AreaChart
        responsive
        style={{ width: "100%", height: "100%" }}
        data={data}
        margin={{ top: 6, right: 4, bottom: 0, left: 0 }}
      >
        <XAxis dataKey="ago" tickFormatter={(v: number) => (v === 0 ? "now" : `-${v} min`)} interval={14} {...AXIS} />
        <YAxis allowDecimals={false} width={32} {...AXIS} />
        <Tooltip
          formatter={(v) => [`${String(v)} completed`, "per minute"]}
          labelFormatter={(v) => (Number(v) === 0 ? "this minute" : `${String(v)} min ago`)}
          isAnimationActive={false}
        />
        <Area
          type="monotone"
          dataKey="n"
          stroke="#2458d3"
          fill="#2458d3"
          fillOpacity={0.15}
          isAnimationActive={false}
        />
      </AreaChart>
    </div>
  );
}
